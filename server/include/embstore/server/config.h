// ServerConfig: what `embstore serve` is told (flags, config file), and the limits of the
// protocol's requests and replies. The vocabulary of the server library: the Server handle
// (server.h) and its transport (server/src/transport/) both take it, so neither includes the other.
#ifndef EMBSTORE_SERVER_CONFIG_H_
#define EMBSTORE_SERVER_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "embstore/common/status.h"

namespace embstore::server {

// Limits of the protocol's requests and replies (docs/SERVING.md, "Resource limits").
struct ServiceOptions {
  // Chunk payload bound when the request says 0. One 1 MiB checksum block per chunk by default.
  std::uint64_t default_chunk_bytes = 1u << 20;
  // Largest chunk payload a client may ask for. With the chunk header this stays under the 4 MiB
  // default receive limit of stock gRPC clients.
  std::uint64_t max_chunk_bytes = (4u << 20) - (64u << 10);
  // Most rows or keys in one Lookup.
  std::uint64_t max_lookup_batch = 16384;
  // Most bytes of row data in one Lookup reply (same reasoning as max_chunk_bytes).
  std::uint64_t max_lookup_bytes = (4u << 20) - (64u << 10);
  // Key chunk bound when the request says 0.
  std::uint64_t default_key_chunk_bytes = 256u << 10;
  // How far ahead of the chunk being sent a stream asks the kernel to read (madvise WILLNEED).
  std::uint64_t readahead_bytes = 4u << 20;
};

struct TlsConfig {
  std::string cert_file;       // PEM server certificate chain; TLS is on when this is set
  std::string key_file;        // PEM private key
  std::string client_ca_file;  // PEM CA bundle: clients must present a certificate it signed
};

struct KeepaliveConfig {
  std::int64_t time_ms = 60000;             // server pings an idle connection this often
  std::int64_t timeout_ms = 20000;          // and closes it when the ping is not answered in time
  std::int64_t min_client_ping_ms = 10000;  // clients pinging more often are told to go away
  bool permit_without_calls = true;         // clients may ping connections without RPCs
  std::int64_t max_connection_idle_ms = 0;  // close connections idle this long (0: never)
};

struct ServerConfig {
  std::string store_dir;
  // "host:port" (port 0 picks a free one) or "unix:/path". At least one.
  std::vector<std::string> listen;
  std::string metrics_listen;  // "host:port" for GET /metrics; empty: no endpoint
  std::chrono::milliseconds poll_interval{1000};    // directory rescan period
  std::chrono::milliseconds shutdown_grace{10000};  // used by the serve command on a signal
  bool verify_on_load = false;                      // check all checksums before serving a file
  ServiceOptions service;
  std::uint32_t max_concurrent_streams = 256;  // StreamRows + StreamKeys over all clients
  // A stream whose next message the client has not taken for this long is cancelled and its
  // slot freed (a client that stopped reading). 0: never.
  std::chrono::milliseconds stream_idle_timeout{60000};
  std::uint64_t max_receive_message_bytes = 4u << 20;  // largest request accepted
  // Memory gRPC may take for connections and requests being received, over all clients (a
  // gRPC resource quota). gRPC reads a request whole before it checks the receive limit, so
  // this bounds what a flood of oversized requests costs. 0: no bound.
  std::uint64_t max_transport_memory_bytes = 128u << 20;
  KeepaliveConfig keepalive;
  TlsConfig tls;
  // Bearer tokens accepted in the "authorization: Bearer <token>" metadata. Empty: no auth.
  std::vector<std::string> auth_tokens;
  std::string log_level = "info";
  // Failed calls of one client (address), method and status code write at most one `rpc` line
  // per this interval; the lines dropped are counted (docs/SERVING.md, "Logs"). 0: every line.
  std::chrono::milliseconds log_repeat_interval{10000};
};

// One setting of ServerConfig as the configuration file and `embstore serve` spell it. Both read
// the one table, ConfigOptions(), so a setting's key, flag, help, check and default (the
// ServerConfig member's initial value) are each written once.
struct ConfigOption {
  // Where the value goes: the member of ServerConfig, by type.
  using Field = std::variant<std::string& (*)(ServerConfig&),
                             std::vector<std::string>& (*)(ServerConfig&), bool& (*)(ServerConfig&),
                             std::uint32_t& (*)(ServerConfig&), std::uint64_t& (*)(ServerConfig&),
                             std::int64_t& (*)(ServerConfig&),
                             std::chrono::milliseconds& (*)(ServerConfig&)>;
  enum class Check {
    kNone,
    kPositive,     // a number above 0
    kExistingFile  // a path that must exist when given as a flag (the server opens it later)
  };
  std::string_view key;   // in the config file: "poll_interval_ms", "limits.max_chunk_bytes"
  std::string_view flag;  // "--poll-interval-ms"; empty: set in the config file only
  std::string_view help;  // one line, without the default (the --help text adds it)
  Field field;
  Check check = Check::kNone;
  // The value is the path of a token file (LoadTokenFile), whose tokens the field receives.
  bool token_file = false;
};

// Every setting, in the order `embstore serve --help` and docs/SERVING.md list them.
std::span<const ConfigOption> ConfigOptions();

// The option's value in `config`, as the --help text and the docs show a default: "1000",
// "true"; empty for an empty string or list.
std::string FormatOptionValue(const ConfigOption& option, const ServerConfig& config);

// Reads a JSON configuration file into `config` (docs/SERVING.md, "Configuration file"): the
// keys of ConfigOptions(), nested by their dots. Keys not in the file keep their value. Unknown
// keys and mistyped or out-of-range values are InvalidArgument naming the file and the key.
Status LoadConfigFile(const std::string& path, ServerConfig* config);

// Reads bearer tokens from a file, one a line; blank lines and lines starting with '#' skipped.
Status LoadTokenFile(const std::string& path, std::vector<std::string>* tokens);

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_CONFIG_H_
