#include <nlohmann/json.hpp>
#include <sstream>

#include "embstore/common/read_file.h"
#include "embstore/server/config.h"

namespace embstore::server {
namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  // Every key of `obj` must be one of `known`.
  Status Keys(const json& obj, const std::string& where, std::initializer_list<const char*> known) {
    if (!obj.is_object()) return Bad(where, "an object");
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* k : known) ok = ok || it.key() == k;
      if (!ok) {
        return Status::InvalidArgument("config file " + file_ + ": unknown key '" +
                                       Join(where, it.key()) + "'");
      }
    }
    return Status::OK();
  }

  template <typename T>
  Status Get(const json& obj, const std::string& where, const char* key, T* out) {
    auto it = obj.find(key);
    if (it == obj.end()) return Status::OK();
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) return Bad(Join(where, key), "true or false");
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) return Bad(Join(where, key), "an integer");
      if constexpr (std::is_unsigned_v<T>) {
        if (it->template get<std::int64_t>() < 0) {
          return Bad(Join(where, key), "a non-negative integer");
        }
      }
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!it->is_string()) return Bad(Join(where, key), "a string");
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      if (!it->is_array()) return Bad(Join(where, key), "an array of strings");
      for (const auto& e : *it) {
        if (!e.is_string()) return Bad(Join(where, key), "an array of strings");
      }
    }
    *out = it->template get<T>();
    return Status::OK();
  }

  Status GetMs(const json& obj, const std::string& where, const char* key,
               std::chrono::milliseconds* out) {
    std::int64_t ms = out->count();
    EMBSTORE_RETURN_NOT_OK(Get(obj, where, key, &ms));
    if (ms < 0) return Bad(Join(where, key), "a non-negative number of milliseconds");
    *out = std::chrono::milliseconds(ms);
    return Status::OK();
  }

 private:
  static std::string Join(const std::string& where, const std::string& key) {
    return where.empty() ? key : where + "." + key;
  }
  Status Bad(const std::string& key, const char* expected) {
    return Status::InvalidArgument("config file " + file_ + ": '" + key + "' must be " + expected);
  }
  std::string file_;
};

}  // namespace

Status LoadConfigFile(const std::string& path, ServerConfig* c) {
  EMBSTORE_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "config file"));
  json j;
  try {
    j = json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
    return Status::InvalidArgument("config file " + path + ": not valid JSON: " + e.what());
  }
  Reader r(path);
  EMBSTORE_RETURN_NOT_OK(
      r.Keys(j, "",
             {"store", "listen", "metrics_listen", "poll_interval_ms", "shutdown_grace_ms",
              "stream_idle_timeout_ms", "verify_on_load", "limits", "chunks", "keepalive", "tls",
              "auth", "log_level", "log_repeat_interval_ms"}));
  EMBSTORE_RETURN_NOT_OK(r.Get(j, "", "store", &c->store_dir));
  EMBSTORE_RETURN_NOT_OK(r.Get(j, "", "listen", &c->listen));
  EMBSTORE_RETURN_NOT_OK(r.Get(j, "", "metrics_listen", &c->metrics_listen));
  EMBSTORE_RETURN_NOT_OK(r.GetMs(j, "", "poll_interval_ms", &c->poll_interval));
  EMBSTORE_RETURN_NOT_OK(r.GetMs(j, "", "shutdown_grace_ms", &c->shutdown_grace));
  EMBSTORE_RETURN_NOT_OK(r.GetMs(j, "", "stream_idle_timeout_ms", &c->stream_idle_timeout));
  EMBSTORE_RETURN_NOT_OK(r.Get(j, "", "verify_on_load", &c->verify_on_load));
  EMBSTORE_RETURN_NOT_OK(r.Get(j, "", "log_level", &c->log_level));
  EMBSTORE_RETURN_NOT_OK(r.GetMs(j, "", "log_repeat_interval_ms", &c->log_repeat_interval));
  if (j.contains("limits")) {
    const json& l = j["limits"];
    EMBSTORE_RETURN_NOT_OK(
        r.Keys(l, "limits",
               {"max_concurrent_streams", "max_lookup_batch", "max_lookup_bytes", "max_chunk_bytes",
                "max_receive_message_bytes", "max_transport_memory_bytes"}));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(l, "limits", "max_concurrent_streams", &c->max_concurrent_streams));
    EMBSTORE_RETURN_NOT_OK(r.Get(l, "limits", "max_lookup_batch", &c->service.max_lookup_batch));
    EMBSTORE_RETURN_NOT_OK(r.Get(l, "limits", "max_lookup_bytes", &c->service.max_lookup_bytes));
    EMBSTORE_RETURN_NOT_OK(r.Get(l, "limits", "max_chunk_bytes", &c->service.max_chunk_bytes));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(l, "limits", "max_receive_message_bytes", &c->max_receive_message_bytes));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(l, "limits", "max_transport_memory_bytes", &c->max_transport_memory_bytes));
  }
  if (j.contains("chunks")) {
    const json& ch = j["chunks"];
    EMBSTORE_RETURN_NOT_OK(r.Keys(
        ch, "chunks", {"default_chunk_bytes", "default_key_chunk_bytes", "readahead_bytes"}));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(ch, "chunks", "default_chunk_bytes", &c->service.default_chunk_bytes));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(ch, "chunks", "default_key_chunk_bytes", &c->service.default_key_chunk_bytes));
    EMBSTORE_RETURN_NOT_OK(r.Get(ch, "chunks", "readahead_bytes", &c->service.readahead_bytes));
  }
  if (j.contains("keepalive")) {
    const json& k = j["keepalive"];
    EMBSTORE_RETURN_NOT_OK(r.Keys(k, "keepalive",
                                  {"time_ms", "timeout_ms", "min_client_ping_ms",
                                   "permit_without_calls", "max_connection_idle_ms"}));
    EMBSTORE_RETURN_NOT_OK(r.Get(k, "keepalive", "time_ms", &c->keepalive.time_ms));
    EMBSTORE_RETURN_NOT_OK(r.Get(k, "keepalive", "timeout_ms", &c->keepalive.timeout_ms));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(k, "keepalive", "min_client_ping_ms", &c->keepalive.min_client_ping_ms));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(k, "keepalive", "permit_without_calls", &c->keepalive.permit_without_calls));
    EMBSTORE_RETURN_NOT_OK(
        r.Get(k, "keepalive", "max_connection_idle_ms", &c->keepalive.max_connection_idle_ms));
  }
  if (j.contains("tls")) {
    const json& t = j["tls"];
    EMBSTORE_RETURN_NOT_OK(r.Keys(t, "tls", {"cert_file", "key_file", "client_ca_file"}));
    EMBSTORE_RETURN_NOT_OK(r.Get(t, "tls", "cert_file", &c->tls.cert_file));
    EMBSTORE_RETURN_NOT_OK(r.Get(t, "tls", "key_file", &c->tls.key_file));
    EMBSTORE_RETURN_NOT_OK(r.Get(t, "tls", "client_ca_file", &c->tls.client_ca_file));
  }
  if (j.contains("auth")) {
    const json& a = j["auth"];
    EMBSTORE_RETURN_NOT_OK(r.Keys(a, "auth", {"token_file"}));
    std::string token_file;
    EMBSTORE_RETURN_NOT_OK(r.Get(a, "auth", "token_file", &token_file));
    if (!token_file.empty()) EMBSTORE_RETURN_NOT_OK(LoadTokenFile(token_file, &c->auth_tokens));
  }
  return Status::OK();
}

Status LoadTokenFile(const std::string& path, std::vector<std::string>* tokens) {
  EMBSTORE_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "token file"));
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  std::size_t before = tokens->size();
  while (std::getline(in, line)) {
    ++lineno;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    line = line.substr(start);
    if (line.find_first_of(" \t") != std::string::npos) {
      return Status::InvalidArgument("token file " + path + " line " + std::to_string(lineno) +
                                     ": a token must not contain spaces");
    }
    tokens->push_back(line);
  }
  if (tokens->size() == before) {
    return Status::InvalidArgument("token file " + path + " holds no tokens");
  }
  return Status::OK();
}

}  // namespace embstore::server
