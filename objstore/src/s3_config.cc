// S3Config from the variables and files the AWS CLI and SDKs read.
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "embstore/objstore/s3.h"

namespace embstore::objstore {
namespace {

std::string Trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The key = value pairs of section `section` of an AWS-style INI file; empty when the file or
// the section is missing. ~/.aws/config names non-default profiles "profile NAME".
std::map<std::string, std::string> IniSection(const std::string& path, const std::string& section,
                                              bool config_file) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  if (!in) return out;
  const std::string want1 = section;
  const std::string want2 = config_file ? "profile " + section : section;
  bool inside = false;
  std::string line;
  while (std::getline(in, line)) {
    line = Trimmed(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      const std::string name = Trimmed(line.substr(1, line.size() - 2));
      inside = name == want1 || name == want2;
      continue;
    }
    const auto eq = line.find('=');
    if (inside && eq != std::string::npos) {
      out[Trimmed(line.substr(0, eq))] = Trimmed(line.substr(eq + 1));
    }
  }
  return out;
}

std::string Get(const GetEnv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

Result<S3Config> S3ConfigFromEnvironment(const GetEnv& getenv) {
  S3Config c;
  c.access_key = Get(getenv, "AWS_ACCESS_KEY_ID");
  c.secret_key = Get(getenv, "AWS_SECRET_ACCESS_KEY");
  c.session_token = Get(getenv, "AWS_SESSION_TOKEN");
  std::string region = Get(getenv, "AWS_REGION");
  if (region.empty()) region = Get(getenv, "AWS_DEFAULT_REGION");
  std::string endpoint = Get(getenv, "AWS_ENDPOINT_URL_S3");
  if (endpoint.empty()) endpoint = Get(getenv, "AWS_ENDPOINT_URL");

  std::string profile = Get(getenv, "AWS_PROFILE");
  if (profile.empty()) profile = "default";
  const std::string home = Get(getenv, "HOME");
  std::string creds_path = Get(getenv, "AWS_SHARED_CREDENTIALS_FILE");
  if (creds_path.empty() && !home.empty()) creds_path = home + "/.aws/credentials";
  std::string config_path = Get(getenv, "AWS_CONFIG_FILE");
  if (config_path.empty() && !home.empty()) config_path = home + "/.aws/config";

  if (c.access_key.empty() && c.secret_key.empty()) {
    auto creds = IniSection(creds_path, profile, false);
    auto conf = IniSection(config_path, profile, true);  // may hold keys too
    for (auto* m : {&creds, &conf}) {
      if (c.access_key.empty() && m->count("aws_access_key_id")) {
        c.access_key = (*m)["aws_access_key_id"];
        c.secret_key = (*m)["aws_secret_access_key"];
        if (m->count("aws_session_token")) c.session_token = (*m)["aws_session_token"];
      }
    }
  }
  if (region.empty() || endpoint.empty()) {
    auto conf = IniSection(config_path, profile, true);
    if (region.empty() && conf.count("region")) region = conf["region"];
    if (endpoint.empty() && conf.count("endpoint_url")) endpoint = conf["endpoint_url"];
  }
  if (c.access_key.empty() != c.secret_key.empty()) {
    return Status::InvalidArgument(
        "S3 credentials are half given: set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
        "(or both keys of profile '" +
        profile + "' in " + creds_path + ")");
  }
  if (!region.empty()) c.region = region;
  if (endpoint.empty()) {
    c.endpoint = "https://s3." + c.region + ".amazonaws.com";
    c.path_style = false;
  } else {
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0) {
      return Status::InvalidArgument("AWS_ENDPOINT_URL '" + endpoint +
                                     "' must start with http:// or https://");
    }
    if (endpoint.find('/', endpoint.find("://") + 3) != std::string::npos) {
      return Status::InvalidArgument("AWS_ENDPOINT_URL '" + endpoint +
                                     "' must be scheme://host[:port], without a path");
    }
    c.endpoint = endpoint;
    c.path_style = true;
  }
  return c;
}

Result<S3Config> S3ConfigFromEnvironment() {
  return S3ConfigFromEnvironment([](const char* n) { return std::getenv(n); });
}

}  // namespace embstore::objstore
