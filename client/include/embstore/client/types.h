// The client library's vocabulary: connection settings, a table's description, how rows are read
// and what a read reports. Client (client.h), every RowSource (row_source.h) and the transport
// underneath them share these types, so the transport needs no top-level header.
#ifndef EMBSTORE_CLIENT_TYPES_H_
#define EMBSTORE_CLIENT_TYPES_H_

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
#include <string>
#include <vector>

#include "embstore/common/file_identity.h"
#include "embstore/store/dtype.h"
#include "embstore/store/table_desc.h"

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

// A table's description (store/table_desc.h): the same struct for a file, an object, a server's
// table and a manifest's logical table.
using store::ServerFile;
using store::TableDesc;

// Cancels reads (RowSource::CopyRows, WriteRows, CopyKeys) from any thread.
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

// Something a read noticed that is worth logging: a resume after a failure, a chunk that failed
// verification and was fetched again, the choice of the local path.
struct LoadEvent {
  enum class Kind { kResume, kBadChunk, kLocal };
  Kind kind;
  int stream = 0;         // which parallel stream
  std::uint64_t row = 0;  // where it resumes / the chunk's first row
  std::string message;
};

// How rows are read, whatever the source (RowSource::CopyRows, WriteRows, CopyKeys).
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

// What a read did (RowSource::CopyRows, WriteRows).
struct LoadStats {
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;       // bytes written into the caller's buffer
  std::uint64_t wire_bytes = 0;  // payload bytes received (refetches included)
  double seconds = 0;
  int streams = 0;
  int resumes = 0;     // streams restarted after a failure
  int bad_chunks = 0;  // chunks that failed verification and were fetched again
  bool local = false;  // served by the local fast path
  // Rows by id from a table object: those taken from its delta object (objstore/delta.h).
  std::uint64_t delta_rows = 0;
  std::uint64_t content_id = 0;
};

// Rows handed over where they are (RowSource::HoldRowIds, Client::LookupRowsHeld): row k's bytes
// start at rows[k], inside memory that `pieces` keeps alive (buffers, replies' payloads).
struct HeldRows {
  std::vector<std::shared_ptr<const void>> pieces;
  std::vector<const std::byte*> rows;
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

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_TYPES_H_
