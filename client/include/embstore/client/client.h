// Client: loads tables from an embstore server (docs/PROTOCOL.md) into memory the caller owns.
//
// A Client holds the connection settings for one target ("host:port" or "unix:/path"), with
// optional TLS and a bearer token. Load() fills a caller-provided buffer with a row range of a
// table, using several streams over separate connections in parallel. Every chunk is verified
// against the table's block checksums before it counts; on transient failures (server restart,
// connection reset, UNAVAILABLE) the client backs off and resumes each stream from its last
// verified row, pinned to the table version it started with, so verified bytes are never
// downloaded twice and unverified bytes never reach the caller's buffer as final data.
//
// Local fast path: when the server says the table's file is on this host and the client can open
// the very same file (same device, inode, size, mtime and content id), Load() copies straight from
// the file with pread(2) instead of streaming (client/row_source.h says how), and OpenLocal() hands
// out a read-only mapping of it for zero-copy use.
//
// Thread safety: a Client may be used from several threads at once; each Load() uses its own
// connections. Callbacks in LoadOptions run on the thread that called Load().
#ifndef EMBSTORE_CLIENT_CLIENT_H_
#define EMBSTORE_CLIENT_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/common/file_identity.h"
#include "embstore/common/status.h"
#include "embstore/store/dtype.h"
#include "embstore/store/table.h"

namespace embstore::client {

namespace transport {
class RowStream;
}

struct TlsOptions {
  bool enabled = false;
  std::string ca_file;      // PEM roots to trust; empty: the system's roots
  std::string cert_file;    // PEM client certificate (for servers that require one)
  std::string key_file;     // PEM client key
  std::string server_name;  // override the name checked against the server certificate
};

struct ConnectOptions {
  std::string target;  // "host:port" or "unix:/path"
  TlsOptions tls;
  std::string token;  // sent as "authorization: Bearer <token>" when not empty
  std::chrono::milliseconds rpc_timeout{30000};  // for unary calls (List, Describe, Lookup)
  // gRPC load-balancing policy for a target that resolves to several servers (a headless
  // Service through "dns:///..."): "pick_first" (gRPC's default: one address a connection) or
  // "round_robin" (calls of a connection spread over every address). Empty: gRPC's default.
  std::string load_balancing;
};

// Where a table's file lives on the server's host (see PROTOCOL.md, "Local fast path").
struct ServerFile {
  std::string path;
  FileIdentity identity;
};

struct TableDesc {
  std::string name;
  std::uint64_t rows = 0;
  std::uint64_t dim = 0;
  store::DType dtype = store::DType::kF32;
  std::uint64_t row_bytes = 0;
  std::uint64_t content_id = 0;
  std::uint64_t generation = 0;
  std::uint64_t block_rows = 0;
  std::uint64_t num_blocks = 0;
  bool has_keys = false;
  std::uint64_t key_bytes = 0;
  int format_version = 0;
  std::map<std::string, std::string> metadata;  // user metadata (Describe only)
  std::optional<ServerFile> file;
};

// Cancels Load() calls from any thread.
class CancelToken {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

 private:
  friend class Client;
  friend class Loader;
  friend class transport::RowStream;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::set<void*> contexts_;  // grpc::ClientContext* of the calls in flight
};

// Something a Load() noticed that is worth logging: a resume after a failure, a chunk that failed
// verification and was fetched again, the choice of the local path.
struct LoadEvent {
  enum class Kind { kResume, kBadChunk, kLocal };
  Kind kind;
  int stream = 0;         // which parallel stream
  std::uint64_t row = 0;  // where it resumes / the chunk's first row
  std::string message;
};

// How rows are read, whatever the source (Client::Load, RowSource::CopyRows).
struct ReadOptions {
  // Parallel streams from a server, or reader threads for a local file; 0 picks DefaultStreams()
  // (capped by the number of blocks).
  int streams = 0;
  std::uint64_t chunk_bytes = 0;  // 0: the server's default
  bool to_f32 = false;            // convert F16/BF16 to f32 into the buffer (SIMD)
  bool verify = true;             // check block checksums (always on for streamed chunks)
  // Whole-read deadline; zero means none. Past it, the read fails with DeadlineExceeded.
  std::chrono::milliseconds timeout{0};
  // Consecutive failed attempts of one stream, without progress in between, before giving up.
  int max_attempts = 8;
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  // Called once before the read starts and then about ten times a second with (bytes delivered,
  // bytes total), and once at the end; return false to cancel.
  std::function<bool(std::uint64_t done, std::uint64_t total)> progress;
  std::function<void(const LoadEvent&)> on_event;
  CancelToken* cancel = nullptr;
  // Instrumentation for tests: called on a worker thread after each chunk has been verified and
  // placed, with the stream index and the chunk's first row. Must be thread-safe.
  std::function<void(int stream, std::uint64_t first_row)> after_chunk;
};

// Client::Load: a row range of a table named per call.
struct LoadOptions : ReadOptions {
  std::uint64_t begin_row = 0;
  std::optional<std::uint64_t> end_row;  // default: the table's last row
  bool allow_local = true;               // use the local fast path when the file is reachable
};

struct LoadStats {
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;       // bytes written into the caller's buffer
  std::uint64_t wire_bytes = 0;  // payload bytes received (refetches included)
  double seconds = 0;
  int streams = 0;
  int resumes = 0;     // streams restarted after a failure
  int bad_chunks = 0;  // chunks that failed verification and were fetched again
  bool local = false;  // served by the local fast path
  std::uint64_t content_id = 0;
};

struct LookupResult {
  std::uint64_t dim = 0;
  store::DType dtype = store::DType::kF32;
  std::vector<std::uint64_t> rows;     // row id of each returned vector, in request order
  std::vector<std::uint32_t> missing;  // indices of requested keys that do not exist
  std::vector<std::byte> data;         // rows.size() vectors in `dtype`
};

// The stream count a load uses when not told: one per core, at most kMaxDefaultStreams. Measured
// with bench/pull_bench on loopback (docs/CLIENT.md): each stream costs a core for receiving,
// copying and hashing, so streams beyond the cores only contend, and past four the server's
// sending side is the limit.
inline constexpr int kMaxDefaultStreams = 4;
int DefaultStreams();

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(const ConnectOptions& options);
  ~Client();

  const std::string& target() const { return options_.target; }

  Result<std::vector<TableDesc>> ListTables();
  // With a `deadline`, it bounds the call (connecting included) instead of rpc_timeout, when it
  // comes first.
  Result<TableDesc> Describe(
      const std::string& table,
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  // Bytes Load() writes for `desc` and `options` (rows in range x row bytes, or x dim x 4 with
  // to_f32).
  static Result<std::uint64_t> OutputBytes(const TableDesc& desc, const LoadOptions& options);

  // Loads rows [begin_row, end_row) of `table` into `out`, whose size must be OutputBytes().
  Result<LoadStats> Load(const std::string& table, std::span<std::byte> out,
                         const LoadOptions& options = {});
  // The same for a table already described: loads the version `desc` describes (its content_id
  // is pinned; a server that has replaced the table answers FailedPrecondition) without asking
  // the server again.
  Result<LoadStats> LoadDescribed(const TableDesc& desc, std::span<std::byte> out,
                                  const LoadOptions& options = {});

  // The server's file for `table`, mapped read-only, when this host can open it (same device,
  // inode, size, mtime and content id); NotFound otherwise. The zero-copy path.
  Result<std::shared_ptr<const store::Table>> OpenLocal(const TableDesc& desc);

  Result<LookupResult> LookupRows(const std::string& table, std::span<const std::uint64_t> rows);
  Result<LookupResult> LookupKeys(const std::string& table, std::span<const std::string> keys);

  // Keys of rows [begin, end) (end: nullopt for all), in row order.
  Result<std::vector<std::string>> Keys(const std::string& table, std::uint64_t begin = 0,
                                        std::optional<std::uint64_t> end = std::nullopt);

 private:
  friend class Loader;
  friend class transport::RowStream;
  struct Impl;
  explicit Client(ConnectOptions options);

  ConnectOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_CLIENT_H_
