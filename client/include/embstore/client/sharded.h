// Sharded tables: one logical table split by row ranges across several servers, described by a
// small JSON manifest (docs/DEPLOY.md, "Sharded tables", is the normative description of the
// file).
//
// Each shard is an ordinary table on one server holding rows [begin, end) of the logical table,
// so its own rows are [0, end - begin). ShardedTable::Load() loads every shard that overlaps the
// requested row range in parallel, each through Client::Load() (parallel verified streams, resume
// after failures, the local fast path), straight into its place in the caller's buffer. Before a
// shard is loaded, the server's description of it is checked against the manifest: rows, dim,
// dtype and, when the manifest pins one, content_id. Every error names the manifest file, the
// shard, its table and its target.
//
// Placement, restarts and discovery of the servers are the job of whatever runs them (systemd,
// Kubernetes); the manifest only says where each row range lives.
//
// Ownership and thread safety: a ShardedTable owns one Client per shard and may be used from
// several threads at once; each Load() runs its own threads and connections. The caller owns the
// output buffer; Load() writes only inside it.
#ifndef EMBSTORE_CLIENT_SHARDED_H_
#define EMBSTORE_CLIENT_SHARDED_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/client/client.h"
#include "embstore/common/status.h"
#include "embstore/store/dtype.h"

namespace embstore::client {

// One row range of the logical table and where it is served.
struct ShardSpec {
  std::uint64_t begin = 0;                  // first logical row
  std::uint64_t end = 0;                    // one past the last logical row
  std::string target;                       // "host:port" or "unix:/path"
  std::string table;                        // the table's name on that server
  std::optional<std::uint64_t> content_id;  // when set, only this version is accepted
};

struct ShardManifest {
  std::string origin;  // the manifest's file name (or what the caller called it), for messages
  std::string table;   // the logical table's name
  std::uint64_t rows = 0;
  std::uint64_t dim = 0;
  store::DType dtype = store::DType::kF32;
  std::vector<ShardSpec> shards;  // sorted by begin, contiguous, covering [0, rows)
};

// Parses and validates manifest text. `origin` names it in error messages. Every error is
// InvalidArgument naming `origin`, the shard (by index) and the field: unknown keys, missing or
// mistyped fields, a shard that is empty or does not start where the previous one ended, shards
// that do not end at `rows`, targets that are neither host:port nor unix:PATH.
Result<ShardManifest> ParseShardManifest(std::string_view text, const std::string& origin);

// Reads and parses the manifest file at `path` (IOError naming it when it cannot be read).
Result<ShardManifest> ReadShardManifest(const std::string& path);

// The manifest as JSON text that ParseShardManifest() reads back.
std::string FormatShardManifest(const ShardManifest& manifest);

struct ShardLoadStats {
  int shard = 0;            // index into manifest.shards
  std::uint64_t begin = 0;  // logical rows loaded from this shard
  std::uint64_t end = 0;
  LoadStats stats;
};

struct ShardedLoadStats {
  std::uint64_t rows = 0;
  std::uint64_t bytes = 0;       // bytes written into the caller's buffer
  std::uint64_t wire_bytes = 0;  // payload bytes received over all shards
  double seconds = 0;
  int resumes = 0;  // stream resumes over all shards
  int bad_chunks = 0;
  int unreachable_retries = 0;  // times a shard's server could not be reached and was retried
  std::vector<ShardLoadStats> shards;  // the shards that overlapped the range, in row order
};

class ShardedTable {
 public:
  // Creates one Client per shard with `connect` (TLS, token, rpc_timeout) and the shard's
  // target. Nothing is contacted yet.
  static Result<std::unique_ptr<ShardedTable>> Open(ShardManifest manifest,
                                                    const ConnectOptions& connect);

  const ShardManifest& manifest() const { return manifest_; }

  // Bytes Load() writes for `options` (rows in range x dim x dtype size, or x 4 with to_f32);
  // OutOfRange when the range is outside the table.
  Result<std::uint64_t> OutputBytes(const LoadOptions& options) const;

  // Loads logical rows [options.begin_row, options.end_row) into `out`, whose size must be
  // OutputBytes(options). Only the shards overlapping the range are contacted, all at once, each
  // asked for its part of the range with options.streams streams. The LoadOptions fields mean
  // what they mean for Client::Load, with these differences:
  //  * A shard whose server cannot be reached (or is not SERVING) when its load starts is retried
  //    with the same backoff (initial_backoff doubling up to max_backoff) for up to max_attempts
  //    attempts, so a server that is restarting is waited for; each retry is reported to
  //    on_event as a kResume event whose `stream` is the shard index. Reachability is asked of
  //    grpc.health.v1 over a fresh connection each time.
  //  * progress sums all shards; on_event's `stream` is the shard index, and its message names
  //    the shard; after_chunk gets (shard index, logical first row).
  //  * When one shard fails the others are cancelled, and the first failure is returned, its
  //    message prefixed with the manifest, shard, table, target and rows.
  //  * timeout bounds the whole sharded load.
  Result<ShardedLoadStats> Load(std::span<std::byte> out, const LoadOptions& options = {});

  // The current description of every shard's table, checked against the manifest (rows, dim,
  // dtype, pinned content_id); the first mismatch or unreachable shard is the error.
  Result<std::vector<TableDesc>> DescribeShards();

  // Keys of logical rows [begin, end) (end: nullopt for all), read shard by shard.
  Result<std::vector<std::string>> Keys(std::uint64_t begin = 0,
                                        std::optional<std::uint64_t> end = std::nullopt);

  // "manifest 'm.json' shard 1 (table 't1' at host:port, rows [10, 20))".
  std::string ShardName(int i) const;
  // FailedPrecondition unless `desc` has the rows, dim, dtype (and content id) shard `i` promises.
  Status CheckShard(int i, const TableDesc& desc) const;
  // The connection options of shard `i`: the table's, with the shard's target.
  ConnectOptions ShardConnect(int i) const;

 private:
  ShardedTable(ShardManifest manifest, ConnectOptions connect,
               std::vector<std::unique_ptr<Client>> clients)
      : manifest_(std::move(manifest)),
        connect_(std::move(connect)),
        clients_(std::move(clients)) {}

  ShardManifest manifest_;
  ConnectOptions connect_;  // target unset: each shard has its own
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_SHARDED_H_
