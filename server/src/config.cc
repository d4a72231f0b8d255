#include "embstore/server/config.h"

#include <algorithm>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "embstore/common/read_file.h"

namespace embstore::server {
namespace {

using nlohmann::json;
using Check = ConfigOption::Check;

// Accessors of ServerConfig's members, for the table below.
#define EMBSTORE_FIELD(member)     \
  +[](ServerConfig & c) -> auto& { \
    return c.member;               \
  }

const ConfigOption kOptions[] = {
    {"store", "--store",
     "Directory whose *.emb files are served (read only), or s3://BUCKET/PREFIX or "
     "hdfs://NAMENODE[:PORT]/DIR (its *.emb objects, mirrored into --cache)",
     EMBSTORE_FIELD(store_dir)},
    {"listen", "--listen",
     "Address to serve on: HOST:PORT (port 0 picks a free one) or unix:PATH; repeat for several",
     EMBSTORE_FIELD(listen)},
    {"metrics_listen", "--metrics-listen",
     "HOST:PORT for Prometheus metrics at GET /metrics; none when not given",
     EMBSTORE_FIELD(metrics_listen)},
    {"poll_interval_ms", "--poll-interval-ms",
     "How often the directory is rescanned for changed files", EMBSTORE_FIELD(poll_interval)},
    {"shutdown_grace_ms", "--shutdown-grace-ms",
     "On SIGTERM/SIGINT, how long streams in flight may run before they are cancelled",
     EMBSTORE_FIELD(shutdown_grace)},
    {"stream_idle_timeout_ms", "--stream-idle-timeout-ms",
     "Cancel a stream whose client has taken no data for this long, freeing its --max-streams "
     "slot; 0 never",
     EMBSTORE_FIELD(stream_idle_timeout)},
    {"verify_on_load", "--verify-on-load", "Check every block checksum of a file before serving it",
     EMBSTORE_FIELD(verify_on_load)},
    {"log_level", "--log-level", "debug, info, warn or error", EMBSTORE_FIELD(log_level)},
    {"log_repeat_interval_ms", "",
     "At most one rpc log line per failing client, method and code in this interval; 0 logs "
     "every failed call",
     EMBSTORE_FIELD(log_repeat_interval)},
    {"limits.max_concurrent_streams", "--max-streams",
     "Most concurrent StreamRows/StreamKeys calls", EMBSTORE_FIELD(max_concurrent_streams),
     Check::kPositive},
    {"limits.max_lookup_batch", "--max-lookup-batch", "Most rows or keys in one Lookup",
     EMBSTORE_FIELD(service.max_lookup_batch), Check::kPositive},
    {"limits.max_lookup_bytes", "", "Most bytes of row data in one Lookup reply",
     EMBSTORE_FIELD(service.max_lookup_bytes), Check::kPositive},
    {"limits.max_chunk_bytes", "--max-chunk-bytes",
     "Largest chunk payload a client may ask for; the default fits the 4 MiB default receive "
     "limit of gRPC clients",
     EMBSTORE_FIELD(service.max_chunk_bytes), Check::kPositive},
    {"limits.max_receive_message_bytes", "--max-receive-message-bytes",
     "Largest request message accepted, RESOURCE_EXHAUSTED above; the default holds 100,000 "
     "keys of 38 bytes",
     EMBSTORE_FIELD(max_receive_message_bytes), Check::kPositive},
    {"limits.max_transport_memory_bytes", "--max-transport-memory-bytes",
     "Memory gRPC may hold for connections and requests being received, all clients together; "
     "bounds what floods of oversized requests cost (gRPC reads a request whole before it "
     "checks its size). 0: no bound",
     EMBSTORE_FIELD(max_transport_memory_bytes)},
    {"chunks.default_chunk_bytes", "--default-chunk-bytes",
     "Chunk payload size when a client does not ask", EMBSTORE_FIELD(service.default_chunk_bytes),
     Check::kPositive},
    {"chunks.default_key_chunk_bytes", "", "Key chunk size when a client does not ask",
     EMBSTORE_FIELD(service.default_key_chunk_bytes), Check::kPositive},
    {"chunks.readahead_bytes", "",
     "How far ahead of the chunk being sent a stream asks the kernel to read (madvise WILLNEED)",
     EMBSTORE_FIELD(service.readahead_bytes)},
    {"keepalive.time_ms", "--keepalive-time-ms", "Ping idle connections this often",
     EMBSTORE_FIELD(keepalive.time_ms), Check::kPositive},
    {"keepalive.timeout_ms", "--keepalive-timeout-ms",
     "Close a connection whose ping is not answered within this",
     EMBSTORE_FIELD(keepalive.timeout_ms), Check::kPositive},
    {"keepalive.min_client_ping_ms", "", "Clients pinging more often are told to go away",
     EMBSTORE_FIELD(keepalive.min_client_ping_ms)},
    {"keepalive.permit_without_calls", "", "Clients may ping connections without calls",
     EMBSTORE_FIELD(keepalive.permit_without_calls)},
    {"keepalive.max_connection_idle_ms", "", "Close connections idle this long; 0 never",
     EMBSTORE_FIELD(keepalive.max_connection_idle_ms)},
    {"tls.cert_file", "--tls-cert", "PEM server certificate chain (turns TLS on)",
     EMBSTORE_FIELD(tls.cert_file), Check::kExistingFile},
    {"tls.key_file", "--tls-key", "PEM private key of the certificate",
     EMBSTORE_FIELD(tls.key_file), Check::kExistingFile},
    {"tls.client_ca_file", "--tls-client-ca",
     "PEM CA bundle; clients must present a certificate signed by it",
     EMBSTORE_FIELD(tls.client_ca_file), Check::kExistingFile},
    {"auth.token_file", "--auth-token-file",
     "File of accepted bearer tokens, one a line; clients must send 'authorization: Bearer "
     "<token>'",
     EMBSTORE_FIELD(auth_tokens), Check::kExistingFile, /*token_file=*/true},
};

#undef EMBSTORE_FIELD

// Reads one value of the configuration file into the option's field, checking its type and
// range; errors name the file and the key.
class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}

  // Every key of `obj` (at `where`, "" for the top) must be one of `known`.
  Status Keys(const json& obj, const std::string& where, const std::vector<std::string>& known) {
    if (!obj.is_object()) return Bad(where, "an object");
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      if (std::find(known.begin(), known.end(), it.key()) == known.end()) {
        return Status::InvalidArgument("config file " + file_ + ": unknown key '" +
                                       (where.empty() ? it.key() : where + "." + it.key()) + "'");
      }
    }
    return Status::OK();
  }

  Status Read(const json& v, const ConfigOption& o, ServerConfig* c) {
    const std::string key(o.key);
    return std::visit(
        [&](auto field) -> Status {
          auto& out = field(*c);
          using T = std::decay_t<decltype(out)>;
          if constexpr (std::is_same_v<T, bool>) {
            if (!v.is_boolean()) return Bad(key, "true or false");
            out = v.get<bool>();
          } else if constexpr (std::is_same_v<T, std::string>) {
            if (!v.is_string()) return Bad(key, "a string");
            out = v.get<std::string>();
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            if (o.token_file) {
              if (!v.is_string()) return Bad(key, "a string");
              const std::string path = v.get<std::string>();
              if (!path.empty()) EMBSTORE_RETURN_NOT_OK(LoadTokenFile(path, &out));
              return Status::OK();
            }
            if (!v.is_array()) return Bad(key, "an array of strings");
            for (const auto& e : v) {
              if (!e.is_string()) return Bad(key, "an array of strings");
            }
            out = v.get<std::vector<std::string>>();
          } else {
            // Numbers: integers, never negative (sizes, counts, durations in milliseconds).
            constexpr bool ms = std::is_same_v<T, std::chrono::milliseconds>;
            if (!v.is_number_integer()) return Bad(key, "an integer");
            if (!v.is_number_unsigned() && v.get<std::int64_t>() < 0) {
              return Bad(key,
                         ms ? "a non-negative number of milliseconds" : "a non-negative integer");
            }
            const std::uint64_t n = v.get<std::uint64_t>();
            if (o.check == Check::kPositive && n == 0) return Bad(key, "a positive integer");
            using Stored = std::conditional_t<ms, std::int64_t, T>;
            if (n > static_cast<std::uint64_t>(std::numeric_limits<Stored>::max())) {
              return Bad(key, "a smaller integer");
            }
            out = T(static_cast<Stored>(n));
          }
          return Status::OK();
        },
        o.field);
  }

 private:
  Status Bad(const std::string& key, const char* expected) {
    return Status::InvalidArgument("config file " + file_ + ": '" + key + "' must be " + expected);
  }
  std::string file_;
};

}  // namespace

std::span<const ConfigOption> ConfigOptions() { return kOptions; }

std::string FormatOptionValue(const ConfigOption& option, const ServerConfig& config) {
  ServerConfig c = config;  // the accessors take a mutable config
  return std::visit(
      [&](auto field) -> std::string {
        const auto& v = field(c);
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::string>) {
          return v;
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string out;
          for (const auto& e : v) out += (out.empty() ? "" : ",") + e;
          return option.token_file ? std::string() : out;
        } else if constexpr (std::is_same_v<T, std::chrono::milliseconds>) {
          return std::to_string(v.count());
        } else {
          return std::to_string(v);
        }
      },
      option.field);
}

Status LoadConfigFile(const std::string& path, ServerConfig* c) {
  EMBSTORE_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "config file"));
  json j;
  try {
    j = json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
    return Status::InvalidArgument("config file " + path + ": not valid JSON: " + e.what());
  }
  // The keys the table allows: top-level names, and the members of each group ("limits").
  std::vector<std::string> top;
  std::map<std::string, std::vector<std::string>> groups;
  for (const ConfigOption& o : kOptions) {
    const std::size_t dot = o.key.find('.');
    const std::string first(o.key.substr(0, dot));
    if (std::find(top.begin(), top.end(), first) == top.end()) top.push_back(first);
    if (dot != std::string_view::npos) groups[first].emplace_back(o.key.substr(dot + 1));
  }
  Reader r(path);
  EMBSTORE_RETURN_NOT_OK(r.Keys(j, "", top));
  for (const auto& [group, members] : groups) {
    if (j.contains(group)) EMBSTORE_RETURN_NOT_OK(r.Keys(j[group], group, members));
  }
  for (const ConfigOption& o : kOptions) {
    std::string pointer = "/" + std::string(o.key);  // "limits.x" is at /limits/x
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    const json::json_pointer at(pointer);
    if (j.contains(at)) EMBSTORE_RETURN_NOT_OK(r.Read(j.at(at), o, c));
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
