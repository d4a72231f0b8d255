// WebHDFS requests over libcurl (webhdfs.h).
#include "embstore/objstore/webhdfs.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "datatransfer.h"
#include "embstore/common/address.h"
#include "http.h"
#include "parts.h"

namespace embstore::objstore {
namespace {

using internal::HttpRequest;
using internal::HttpResponse;
using internal::UriEncode;
using Json = nlohmann::json;

constexpr std::string_view kScheme = "hdfs://";

// OPEN's buffersize: the DataNode reads the block and writes the HTTP body in pieces of this
// size. Its default (io.file.buffer.size, 4 KiB) makes a DataNode's WebHDFS reads about three
// times slower than with 1 MiB (measured on a MiniDFSCluster; bench/harness/phases/hdfs.py).
constexpr std::uint64_t kReadBufferBytes = 1 << 20;

bool Ok(long status) { return status >= 200 && status < 300; }

// Exceptions the NameNode throws for a state that passes: a standby or restarting NameNode, safe
// mode at startup, a retry it asks for.
bool RetriableException(const std::string& e) {
  return e == "StandbyException" || e == "SafeModeException" || e == "RetriableException" ||
         e == "ObserverRetryOnActiveException";
}

// What a non-JSON error body says, in one line: an HTML page's title, or the start of the text.
std::string BodyGist(const std::string& body) {
  const std::size_t t = body.find("<title>");
  if (t != std::string::npos) {
    const std::size_t e = body.find("</title>", t);
    return body.substr(t + 7, e == std::string::npos ? 200 : std::min<std::size_t>(e - t - 7, 200));
  }
  std::string gist = body.substr(0, std::min<std::size_t>(body.size(), 200));
  for (char& c : gist) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return gist;
}

// The Status of a non-2xx answer, naming the URL, the request and the WebHDFS exception; hints
// at authentication in the terms of the mode `c` uses.
Status HdfsError(const HdfsConfig& c, const std::string& where, long status,
                 const std::string& body) {
  const RemoteException re = ParseRemoteException(body);
  std::string detail = "HTTP " + std::to_string(status);
  if (!re.exception.empty()) detail += " " + re.exception;
  if (!re.message.empty()) {
    // The message's first line: Hadoop appends stack-like detail to some.
    detail += ": " + re.message.substr(0, re.message.find('\n'));
  } else if (re.exception.empty() && !body.empty()) {
    detail += ": " + BodyGist(body);
  }
  const std::string& e = re.exception;
  if (re.exception.empty() && body.find("HTTP request to a Hadoop IPC port") != std::string::npos) {
    return Status::InvalidArgument(
        where +
        ": that port is the NameNode's RPC port (fs.defaultFS, 8020 by default), not "
        "its HTTP port: an hdfs:// address here names the WebHDFS port "
        "(dfs.namenode.http-address, 9870 by default)");
  }
  if (e == "FileNotFoundException" || (status == 404 && !e.empty())) {
    return Status::NotFound(where + ": no such file or folder (" + detail + ")");
  }
  if (status == 404) {
    return Status::IOError(where + ": the server does not answer as a WebHDFS NameNode (" + detail +
                           "); is this its HTTP port (dfs.namenode.http-address)?");
  }
  const bool token = !c.delegation_token.empty();
  if (token && (status == 401 || e == "SecurityException" || e == "InvalidToken" ||
                e == "SecretManager$InvalidToken")) {
    return Status::Unauthenticated(where + ": the delegation token was refused (" + detail +
                                   "); it may have expired or been cancelled: fetch a new one "
                                   "(EMBSTORE_HDFS_DELEGATION_TOKEN)");
  }
  if (e == "AccessControlException" || e == "SecurityException") {
    return Status::PermissionDenied(
        where + ": permission denied (" + detail + "); check the user (" +
        (c.kerberos ? std::string("the Kerberos principal") : "HADOOP_USER_NAME") +
        ") and the path's owner and mode");
  }
  if (status == 401) {
    if (c.kerberos) {
      return Status::Unauthenticated(
          where + ": the NameNode refused Kerberos authentication (" + detail +
          "); is there a valid ticket (kinit, KRB5CCNAME) in the NameNode's realm (KRB5_CONFIG)?");
    }
    return Status::Unauthenticated(where + ": the NameNode wants Kerberos (" + detail +
                                   "); set EMBSTORE_HDFS_AUTH=kerberos after kinit, or a "
                                   "delegation token (EMBSTORE_HDFS_DELEGATION_TOKEN)");
  }
  if (e == "FileAlreadyExistsException") return Status::AlreadyExists(where + ": " + detail);
  if (e == "IllegalArgumentException" || e == "InvalidPathException" ||
      e == "UnsupportedOperationException") {
    return Status::InvalidArgument(where + ": " + detail);
  }
  if (RetriableException(e) || status >= 500 || status == 429) {
    return Status::Unavailable(where + ": " + detail);
  }
  // Other 403s are not about permissions: WebHDFS answers 403 for any IOException the server
  // throws (an offset past the end of the file, for one).
  return Status::IOError(where + ": " + detail);
}

// The JSON document of a 2xx answer, or IOError naming `where`.
Result<Json> JsonBody(const std::string& where, const HttpResponse& r) {
  Json j = Json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::IOError(where + ": the answer is not a WebHDFS JSON document (HTTP " +
                           std::to_string(r.status) + ")");
  }
  return j;
}

// A FileStatus object's fields, checked.
struct FileStatus {
  std::string suffix;
  bool directory = false;
  std::uint64_t length = 0;
  std::uint64_t file_id = 0;
};
Result<FileStatus> ParseFileStatus(const std::string& where, const Json& j) {
  FileStatus f;
  try {
    f.suffix = j.value("pathSuffix", std::string());
    const std::string type = j.at("type").get<std::string>();
    f.directory = type == "DIRECTORY";
    f.length = j.at("length").get<std::uint64_t>();
    f.file_id = j.value("fileId", std::uint64_t{0});
  } catch (const std::exception& e) {
    return Status::IOError(where + ": the NameNode's FileStatus is malformed (" + e.what() + ")");
  }
  return f;
}

// "host:port" of an absolute http(s) URL.
std::string AuthorityOf(const std::string& url) {
  const std::size_t b = url.find("://");
  if (b == std::string::npos) return "";
  const std::size_t e = url.find_first_of("/?", b + 3);
  return url.substr(b + 3, e == std::string::npos ? std::string::npos : e - b - 3);
}

// Whether HOST[:PORT] or [V6][:PORT] gives a port.
bool HasPort(const std::string& authority) {
  const std::size_t bracket = authority.rfind(']');
  return authority.find(':', bracket == std::string::npos ? 0 : bracket) != std::string::npos;
}

// The authority with the default WebHDFS port added when it has none.
std::string WithPort(const std::string& authority) {
  return HasPort(authority) ? authority : authority + ":" + std::to_string(kDefaultWebHdfsPort);
}

std::string RandomHex() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

bool IsHdfsUrl(std::string_view s) { return s.starts_with(kScheme); }

Result<ObjectUrl> ParseHdfsUrl(std::string_view s) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("'" + std::string(s) +
                                   "' is not an hdfs://NAMENODE[:PORT]/PATH "
                                   "address: " +
                                   why);
  };
  if (!IsHdfsUrl(s)) return bad("it does not start with hdfs://");
  std::string_view rest = s.substr(kScheme.size());
  const std::size_t slash = rest.find('/');
  ObjectUrl u;
  u.scheme = "hdfs";
  u.authority = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) u.key = std::string(rest.substr(slash + 1));
  if (u.authority.empty()) return bad("it names no NameNode");
  // HOST or HOST:PORT ([V6] or [V6]:PORT), checked as a server address is.
  auto addr = ParseAddress(WithPort(u.authority), AddressUse::kConnect, "HDFS NameNode");
  if (!addr.ok()) return bad(addr.status().message());
  if (addr->kind != Address::Kind::kHostPort) return bad("the NameNode must be HOST[:PORT]");
  if (u.key.find('?') != std::string::npos || u.key.find('#') != std::string::npos) {
    return bad("a path with '?' or '#' is not supported");
  }
  for (std::size_t b = 0; b <= u.key.size();) {
    const std::size_t e = std::min(u.key.find('/', b), u.key.size());
    const std::string_view part = std::string_view(u.key).substr(b, e - b);
    if (part == "." || part == "..") return bad("'.' and '..' are not allowed in the path");
    if (part.empty() && e < u.key.size()) return bad("the path has an empty part ('//')");
    b = e + 1;
  }
  return u;
}

RemoteException ParseRemoteException(std::string_view body) {
  RemoteException re;
  Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("RemoteException")) return re;
  const Json& r = j["RemoteException"];
  if (!r.is_object()) return re;
  if (r.contains("exception") && r["exception"].is_string()) re.exception = r["exception"];
  if (r.contains("message") && r["message"].is_string()) re.message = r["message"];
  return re;
}

Result<HdfsConfig> HdfsConfigFromEnvironment(const GetEnv& getenv) {
  auto get = [&](const char* name) {
    const char* v = getenv(name);
    return std::string(v != nullptr ? v : "");
  };
  HdfsConfig c;
  c.user = get("HADOOP_USER_NAME");
  if (c.user.empty()) {
    if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr) {
      c.user = pw->pw_name;
    } else {
      c.user = get("USER");
    }
  }
  c.delegation_token = get("EMBSTORE_HDFS_DELEGATION_TOKEN");
  const std::string auth = get("EMBSTORE_HDFS_AUTH");
  if (auth == "kerberos") {
    if (!internal::HasSpnego()) {
      return Status::FailedPrecondition(
          "EMBSTORE_HDFS_AUTH=kerberos: this build's libcurl has no GSS-API (SPNEGO) support, "
          "so it cannot authenticate with Kerberos; use a delegation token "
          "(EMBSTORE_HDFS_DELEGATION_TOKEN), or embstore built against a libcurl with GSS-API "
          "(Debian's)");
    }
    c.kerberos = true;
  } else if (!auth.empty() && auth != "simple") {
    return Status::InvalidArgument("EMBSTORE_HDFS_AUTH is '" + auth +
                                   "': it must be 'simple' or 'kerberos'");
  }
  const std::string https = get("EMBSTORE_HDFS_HTTPS");
  if (https == "1" || https == "true") {
    c.https = true;
  } else if (!https.empty() && https != "0" && https != "false") {
    return Status::InvalidArgument("EMBSTORE_HDFS_HTTPS is '" + https + "': it must be 1 or 0");
  }
  c.ca_file = get("EMBSTORE_HDFS_CA_FILE");
  if (const std::string bs = get("EMBSTORE_HDFS_BLOCK_SIZE"); !bs.empty()) {
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(bs.data(), bs.data() + bs.size(), v);
    if (ec != std::errc() || p != bs.data() + bs.size() || v == 0) {
      return Status::InvalidArgument("EMBSTORE_HDFS_BLOCK_SIZE is '" + bs +
                                     "': it must be a number of bytes");
    }
    c.block_size = v;
  }
  const std::string direct = get("EMBSTORE_HDFS_DIRECT_READS");
  if (direct == "0" || direct == "false") {
    c.direct_reads = false;
  } else if (!direct.empty() && direct != "1" && direct != "true") {
    return Status::InvalidArgument("EMBSTORE_HDFS_DIRECT_READS is '" + direct +
                                   "': it must be 1 or 0");
  }
  return c;
}

Result<HdfsConfig> HdfsConfigFromEnvironment() {
  return HdfsConfigFromEnvironment([](const char* n) { return std::getenv(n); });
}

WebHdfsClient::WebHdfsClient(HdfsConfig config)
    : config_(std::move(config)),
      http_(std::make_unique<internal::HttpClient>(internal::HttpOptionsOf(config_))),
      client_name_("embstore-" + std::to_string(::getpid()) + "-" + RandomHex()) {}

WebHdfsClient::~WebHdfsClient() = default;

std::string WebHdfsClient::NameNodeUrl(const ObjectUrl& url, std::string_view path,
                                       std::string_view op, std::string_view query) const {
  std::string u = std::string(config_.https ? "https://" : "http://") + WithPort(url.authority) +
                  "/webhdfs/v1" + UriEncode(path, /*keep_slash=*/true) + "?op=" + std::string(op);
  if (!config_.delegation_token.empty()) {
    u += "&delegation=" + UriEncode(config_.delegation_token, false);
  } else if (!config_.user.empty()) {
    u += "&user.name=" + UriEncode(config_.user, false);
  }
  if (!query.empty()) u += "&" + std::string(query);
  return u;
}

Result<HttpResponse> WebHdfsClient::Perform(HttpRequest r, int max_attempts) {
  if (config_.kerberos || !config_.ca_file.empty()) {
    auto outer = r.prepare;
    r.prepare = [this, outer](CURL* curl) {
      if (config_.kerberos) {
        curl_easy_setopt(curl, CURLOPT_HTTPAUTH, static_cast<long>(CURLAUTH_NEGOTIATE));
        curl_easy_setopt(curl, CURLOPT_USERPWD, ":");
      }
      if (!config_.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, config_.ca_file.c_str());
      if (outer) outer(curl);
    };
  }
  if (max_attempts <= 0) max_attempts = config_.max_attempts;
  auto delay = config_.first_backoff;
  for (int attempt = 1;; ++attempt) {
    Result<HttpResponse> resp = http_->Perform(r, max_attempts - attempt + 1);
    // 403 with a retriable exception (safe mode, a standby): HttpClient does not retry 4xx.
    if (!resp.ok() || resp->status != 403 ||
        !RetriableException(ParseRemoteException(resp->body).exception) ||
        attempt >= max_attempts) {
      return resp;
    }
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::milliseconds(5000));
  }
}

Result<ObjectInfo> WebHdfsClient::Stat(const ObjectUrl& url) {
  HttpRequest r;
  r.url = NameNodeUrl(url, "/" + url.key, "GETFILESTATUS");
  r.what = url.ToString() + ": GETFILESTATUS";
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(std::move(r)));
  const std::string where = url.ToString() + ": GETFILESTATUS";
  if (!Ok(resp.status)) return HdfsError(config_, where, resp.status, resp.body);
  EMBSTORE_ASSIGN_OR_RETURN(Json j, JsonBody(where, resp));
  if (!j.contains("FileStatus")) return Status::IOError(where + ": the answer has no FileStatus");
  EMBSTORE_ASSIGN_OR_RETURN(FileStatus f, ParseFileStatus(where, j["FileStatus"]));
  if (f.directory) {
    return Status::InvalidArgument(url.ToString() + " is a folder, not a file");
  }
  if (f.file_id == 0) {
    return Status::IOError(where + ": the NameNode gives no fileId (Hadoop 2.4 or later needed)");
  }
  ObjectInfo info;
  info.key = url.key;
  info.size = f.length;
  info.version = std::to_string(f.file_id);
  return info;
}

Status WebHdfsClient::ReadRange(const ObjectUrl& url, const std::string& version,
                                std::uint64_t offset, std::span<std::byte> out) {
  if (out.empty()) return Status::OK();
  std::uint64_t id = 0;
  auto [p, ec] = std::from_chars(version.data(), version.data() + version.size(), id);
  if (ec != std::errc() || p != version.data() + version.size() || id == 0) {
    return Status::InvalidArgument(url.ToString() + ": '" + version +
                                   "' is not an HDFS file version (an inode id)");
  }
  if (config_.direct_reads && direct_ok_.load(std::memory_order_relaxed)) {
    bool fall_back = false;
    Status st = ReadDirect(url, version, offset, out, &fall_back);
    if (st.ok()) {
      direct_bytes_ += out.size();
      return st;
    }
    if (!fall_back) return st;
  }
  const std::string range =
      "[" + std::to_string(offset) + ", " + std::to_string(offset + out.size()) + ")";
  const std::string where = url.ToString() + ": OPEN bytes " + range;
  auto replaced = [&](const Status& st) { return Replaced(url, version, st); };
  // The inode, not the path: a file renamed over the path cannot be read by mistake.
  const std::string inode_path = "/.reserved/.inodes/" + version;
  std::set<std::string> excluded;  // DataNodes that failed this read
  auto delay = config_.first_backoff;
  Status last;
  for (int attempt = 1; attempt <= config_.max_attempts; ++attempt) {
    if (attempt > 1) {
      std::this_thread::sleep_for(delay);
      delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::milliseconds(5000));
    }
    std::string query = "offset=" + std::to_string(offset) +
                        "&length=" + std::to_string(out.size()) +
                        "&buffersize=" + std::to_string(kReadBufferBytes);
    if (!excluded.empty()) {
      std::string list;
      for (const auto& dn : excluded) list += (list.empty() ? "" : ",") + dn;
      query += "&excludedatanodes=" + UriEncode(list, false);
    }
    HttpRequest nn;
    nn.url = NameNodeUrl(url, inode_path, "OPEN", query);
    nn.what = where;
    nn.sink = out;  // an HttpFS gateway answers with the bytes itself
    nn.has_sink = true;
    EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(std::move(nn)));
    if (Ok(resp.status)) {
      webhdfs_bytes_ += out.size();
      return Status::OK();
    }
    if (resp.status != 307 && resp.status != 302) {
      Status st = HdfsError(config_, where, resp.status, resp.body);
      return st.code() == StatusCode::kNotFound ? replaced(st) : st;
    }
    auto loc = resp.headers.find("location");
    if (loc == resp.headers.end() || loc->second.empty()) {
      return Status::IOError(where + ": the NameNode's redirect has no Location");
    }
    HttpRequest dn;
    dn.url = loc->second;
    dn.what = where + " from DataNode " + AuthorityOf(loc->second);
    dn.sink = out;
    dn.has_sink = true;
    // One attempt per DataNode: a failed one is excluded and the NameNode asked again.
    Result<HttpResponse> data = Perform(dn, 1);
    if (data.ok() && Ok(data->status)) {
      webhdfs_bytes_ += out.size();
      return Status::OK();
    }
    if (data.ok() && data->status < 500) {
      Status st = HdfsError(config_, dn.what, data->status, data->body);
      return st.code() == StatusCode::kNotFound ? replaced(st) : st;
    }
    last = data.ok() ? HdfsError(config_, dn.what, data->status, data->body) : data.status();
    if (last.code() != StatusCode::kUnavailable) return last;
    excluded.insert(ExcludeName(url, inode_path, offset, out.size(), AuthorityOf(loc->second)));
  }
  return Status::Unavailable(where + ": gave up after " + std::to_string(config_.max_attempts) +
                             " attempts (DataNodes tried: " + std::to_string(excluded.size()) +
                             "): " + last.message());
}

Status WebHdfsClient::Replaced(const ObjectUrl& url, const std::string& version,
                               const Status& st) const {
  return Status::FailedPrecondition(url.ToString() +
                                    " was replaced or deleted since it was opened "
                                    "(inode " +
                                    version + "): " + st.message());
}

Status WebHdfsClient::ReadDirect(const ObjectUrl& url, const std::string& version,
                                 std::uint64_t offset, std::span<std::byte> out, bool* fall_back) {
  *fall_back = true;
  const std::uint64_t end = offset + out.size();
  const std::string where =
      url.ToString() + ": bytes [" + std::to_string(offset) + ", " + std::to_string(end) + ")";
  internal::BlockReadOptions o;
  o.client_name = client_name_;
  o.io_timeout = config_.stall_timeout;
  // A second round only after a DataNode refused a block token (it expired): the NameNode
  // hands out new ones with the locations.
  for (int round = 0; round < 2; ++round) {
    HttpRequest r;
    r.url =
        NameNodeUrl(url, "/.reserved/.inodes/" + version, "GET_BLOCK_LOCATIONS",
                    "offset=" + std::to_string(offset) + "&length=" + std::to_string(out.size()));
    r.what = where + ": GET_BLOCK_LOCATIONS";
    Result<HttpResponse> answer = Perform(r);
    if (!answer.ok()) {
      *fall_back = false;  // the NameNode is out of reach, whichever way the bytes would come
      return answer.status();
    }
    const HttpResponse& resp = *answer;
    if (!Ok(resp.status)) {
      Status st = HdfsError(config_, r.what, resp.status, resp.body);
      if (st.code() == StatusCode::kNotFound) {
        *fall_back = false;
        return Replaced(url, version, st);
      }
      return st;  // a gateway without GET_BLOCK_LOCATIONS, say: WebHDFS reads do the rest
    }
    EMBSTORE_ASSIGN_OR_RETURN(std::vector<internal::HdfsBlock> blocks,
                              internal::ParseLocatedBlocks(r.what, resp.body));
    bool token_refused = false;
    std::uint64_t at = offset;  // the blocks must cover [offset, end) in order
    for (const internal::HdfsBlock& block : blocks) {
      if (at >= end) break;
      if (block.file_offset + block.bytes <= at) continue;
      if (block.file_offset > at) {
        return Status::IOError(where + ": the NameNode gave no block for offset " +
                               std::to_string(at));
      }
      const std::uint64_t e = std::min(end, block.file_offset + block.bytes);
      Status last = Status::Unavailable(where + ": no DataNode holds block " +
                                        std::to_string(block.block_id));
      bool done = false, unreachable = true;
      for (const std::string& dn : block.datanodes) {
        internal::BlockReadFailure why;
        last = internal::ReadBlock(url.ToString(), dn, block, at - block.file_offset,
                                   out.subspan(at - offset, e - at), o, &why);
        if (last.ok()) {
          done = true;
          break;
        }
        if (why == internal::BlockReadFailure::kNeedsSasl) {
          // Every DataNode of this cluster wants it: read over WebHDFS from now on.
          direct_ok_ = false;
          return last;
        }
        if (why == internal::BlockReadFailure::kToken) token_refused = true;
        if (last.message().find("cannot connect") == std::string::npos &&
            last.message().find("timed out") == std::string::npos) {
          unreachable = false;
        }
      }
      if (!done) {
        if (token_refused && round == 0) break;
        if (unreachable && !block.datanodes.empty()) {
          // No replica's transfer port answers while the NameNode does: a cluster whose
          // DataNodes this host reaches only over HTTP (behind a gateway, a firewall).
          direct_ok_ = false;
        }
        if (last.code() == StatusCode::kCorruption && block.datanodes.size() > 0) {
          // Every replica failed its HDFS checksums; a read over WebHDFS would too.
          *fall_back = false;
        }
        return last;
      }
      at = e;
    }
    if (at >= end) return Status::OK();
    if (!token_refused) {
      return Status::IOError(where + ": the NameNode's blocks end at " + std::to_string(at));
    }
  }
  return Status::PermissionDenied(where + ": the DataNodes refused new block tokens too");
}

std::string WebHdfsClient::ExcludeName(const ObjectUrl& url, const std::string& path,
                                       std::uint64_t offset, std::uint64_t length,
                                       const std::string& http_authority) {
  HttpRequest r;
  r.url = NameNodeUrl(url, path, "GET_BLOCK_LOCATIONS",
                      "offset=" + std::to_string(offset) + "&length=" + std::to_string(length));
  r.what = url.ToString() + ": GET_BLOCK_LOCATIONS";
  Result<HttpResponse> resp = Perform(std::move(r), 1);
  if (!resp.ok() || !Ok(resp->status)) return http_authority;
  Json j = Json::parse(resp->body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return http_authority;
  const Json* blocks = nullptr;
  if (auto lb = j.find("LocatedBlocks"); lb != j.end() && lb->is_object()) {
    if (auto b = lb->find("locatedBlocks"); b != lb->end() && b->is_array()) blocks = &*b;
  }
  if (blocks == nullptr) return http_authority;
  for (const Json& block : *blocks) {
    auto locations = block.find("locations");
    if (locations == block.end() || !locations->is_array()) continue;
    for (const Json& dn : *locations) {
      if (!dn.is_object()) continue;
      const std::string ip = dn.value("ipAddr", std::string());
      const std::string host = dn.value("hostName", std::string());
      const long info = dn.value("infoPort", 0L);
      const long xfer = dn.value("xferPort", 0L);
      if (xfer <= 0 || info <= 0) continue;
      const std::string port = ":" + std::to_string(info);
      if (http_authority == ip + port || http_authority == host + port) {
        return ip + ":" + std::to_string(xfer);
      }
    }
  }
  return http_authority;
}

Result<std::vector<ObjectInfo>> WebHdfsClient::List(const ObjectUrl& prefix) {
  std::string dir = prefix.key, name_prefix;
  if (!prefix.NamesPrefix()) {
    const std::size_t slash = dir.rfind('/');
    name_prefix = slash == std::string::npos ? dir : dir.substr(slash + 1);
    dir = slash == std::string::npos ? "" : dir.substr(0, slash + 1);
  }
  ObjectUrl folder{prefix.scheme, prefix.authority, dir};
  const std::string where = folder.ToString() + ": LISTSTATUS";
  HttpRequest r;
  r.url = NameNodeUrl(prefix, "/" + dir, "LISTSTATUS");
  r.what = where;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(std::move(r)));
  if (!Ok(resp.status)) return HdfsError(config_, where, resp.status, resp.body);
  EMBSTORE_ASSIGN_OR_RETURN(Json j, JsonBody(where, resp));
  const Json* list = nullptr;
  if (j.contains("FileStatuses") && j["FileStatuses"].is_object() &&
      j["FileStatuses"].contains("FileStatus") && j["FileStatuses"]["FileStatus"].is_array()) {
    list = &j["FileStatuses"]["FileStatus"];
  }
  if (list == nullptr) return Status::IOError(where + ": the answer has no FileStatuses");
  std::vector<ObjectInfo> out;
  for (const Json& e : *list) {
    EMBSTORE_ASSIGN_OR_RETURN(FileStatus f, ParseFileStatus(where, e));
    if (f.suffix.empty()) {
      // LISTSTATUS of a file lists the file itself.
      return Status::InvalidArgument(folder.ToString() + " is a file, not a folder");
    }
    if (f.directory || !f.suffix.starts_with(name_prefix)) continue;
    std::string key = dir;
    if (!key.empty() && key.back() != '/') key += '/';
    out.push_back({key + f.suffix, f.length, std::to_string(f.file_id)});
  }
  return out;
}

Status WebHdfsClient::MakeDirectories(const ObjectUrl& url) {
  const std::string where = url.ToString() + ": MKDIRS";
  HttpRequest r;
  r.method = "PUT";
  r.url = NameNodeUrl(url, "/" + url.key, "MKDIRS");
  r.what = where;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(std::move(r)));
  if (!Ok(resp.status)) return HdfsError(config_, where, resp.status, resp.body);
  EMBSTORE_ASSIGN_OR_RETURN(Json j, JsonBody(where, resp));
  if (!j.value("boolean", false)) return Status::IOError(where + ": the NameNode answered false");
  return Status::OK();
}

Status WebHdfsClient::Rename(const ObjectUrl& from, const ObjectUrl& to, bool overwrite) {
  const std::string where = from.ToString() + ": RENAME to " + to.ToString();
  HttpRequest r;
  r.method = "PUT";
  std::string query = "destination=" + UriEncode("/" + to.key, /*keep_slash=*/true);
  if (overwrite) query += "&renameoptions=OVERWRITE";
  r.url = NameNodeUrl(from, "/" + from.key, "RENAME", query);
  r.what = where;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(std::move(r)));
  if (!Ok(resp.status)) return HdfsError(config_, where, resp.status, resp.body);
  if (!overwrite) {
    // Without options the NameNode answers {"boolean": false} for a failed rename.
    EMBSTORE_ASSIGN_OR_RETURN(Json j, JsonBody(where, resp));
    if (!j.value("boolean", false)) {
      return Status::AlreadyExists(where +
                                   ": the NameNode refused (the destination exists, or "
                                   "its folder does not)");
    }
  }
  return Status::OK();
}

Result<std::string> WebHdfsClient::Upload(const std::string& path, const ObjectUrl& url,
                                          const TransferOptions& o) {
  if (url.NamesPrefix()) {
    return Status::InvalidArgument("'" + url.ToString() + "' names a folder, not a file to write");
  }
  EMBSTORE_ASSIGN_OR_RETURN(internal::LocalFile file, internal::LocalFile::Open(path));
  const std::size_t slash = url.key.rfind('/');
  const std::string parent = slash == std::string::npos ? "" : url.key.substr(0, slash + 1);
  const std::string name = url.key.substr(parent.size());
  Status last;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    // A new temporary name per attempt: a failed attempt's file may linger if its DELETE fails.
    const ObjectUrl temp{
        url.scheme, url.authority,
        parent + "." + name + ".tmp-embstore-" + std::to_string(::getpid()) + "-" + RandomHex()};
    const std::string where = url.ToString() + ": CREATE " + temp.ToString();
    HttpRequest create;
    create.method = "PUT";
    create.url =
        NameNodeUrl(temp, "/" + temp.key, "CREATE",
                    "overwrite=false" + (config_.block_size > 0
                                             ? "&blocksize=" + std::to_string(config_.block_size)
                                             : std::string()));
    create.what = where;
    EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(create));
    if (resp.status != 307 && resp.status != 302 && !Ok(resp.status)) {
      return HdfsError(config_, where, resp.status, resp.body);
    }
    std::string target = create.url;  // an HttpFS gateway takes the data itself
    if (resp.status == 307 || resp.status == 302) {
      auto loc = resp.headers.find("location");
      if (loc == resp.headers.end() || loc->second.empty()) {
        return Status::IOError(where + ": the NameNode's redirect has no Location");
      }
      target = loc->second;
    } else {
      target += "&data=true";
    }
    HttpRequest data;
    data.method = "PUT";
    data.url = target;
    data.what = where + " (data to " + AuthorityOf(target) + ")";
    data.headers = {"Content-Type: application/octet-stream", "Expect:"};
    data.body_fd = file.fd();
    data.body_len = file.size();
    if (o.progress) {
      data.on_sent = [&](std::uint64_t sent) { return o.progress(sent, file.size()); };
    }
    Result<HttpResponse> sent = Perform(data, 1);
    Status st = sent.status();
    if (sent.ok() && !Ok(sent->status))
      st = HdfsError(config_, data.what, sent->status, sent->body);
    if (st.ok()) {
      // The bytes HDFS holds must be the file's, whole, before the file takes the real name.
      auto written = Stat(temp);
      st = written.status();
      if (written.ok() && written->size != file.size()) {
        st = Status::IOError(where + ": HDFS holds " + std::to_string(written->size) +
                             " bytes of the " + std::to_string(file.size()) + " sent");
      }
    }
    if (st.ok()) st = Rename(temp, url, /*overwrite=*/true);
    if (st.ok()) {
      EMBSTORE_ASSIGN_OR_RETURN(ObjectInfo info, Stat(url));
      return info.version;
    }
    (void)Delete(temp);  // best effort
    if (st.code() != StatusCode::kUnavailable) return st;
    last = st;
  }
  return last;
}

Status WebHdfsClient::Delete(const ObjectUrl& url) {
  const std::string where = url.ToString() + ": DELETE";
  HttpRequest r;
  r.method = "DELETE";
  r.url = NameNodeUrl(url, "/" + url.key, "DELETE", "recursive=false");
  r.what = where;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(std::move(r)));
  if (!Ok(resp.status) && resp.status != 404)
    return HdfsError(config_, where, resp.status, resp.body);
  return Status::OK();
}

}  // namespace embstore::objstore
