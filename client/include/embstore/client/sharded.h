// Sharded tables: one logical table split by row ranges across several places, described by a
// small JSON manifest (docs/DEPLOY.md, "Sharded tables", is the normative description of the
// file). This header is the manifest itself: its types, parser and writer.
//
// Each shard is an ordinary table holding rows [begin, end) of the logical table, so its own rows
// are [0, end - begin), wherever the resolver can open it: on a server, in S3, in a local file or
// store directory. OpenSource (open_source.h) opens a manifest as one RowSource, whose shards are
// child sources of their own; each is checked against the manifest (rows, dim, dtype and, when
// the manifest pins one, content_id) before it is read. Every error names the manifest file, the
// shard, its table and its target.
//
// Placement, restarts and discovery of the servers are the job of whatever runs them (systemd,
// Kubernetes); the manifest only says where each row range lives.
#ifndef EMBSTORE_CLIENT_SHARDED_H_
#define EMBSTORE_CLIENT_SHARDED_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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

// Whether `target` can be a shard's target: a server (host:port, or unix:PATH, dns:, ipv4:,
// ipv6:, unix-abstract: targets), an s3:// address of a table object or prefix, or a local path
// with a '/' in it (a table file or store directory; relative paths are relative to the
// manifest's folder, so "./items-0.emb" is next to it).
bool ValidShardTarget(std::string_view target);
// Whether a valid target is a local path.
bool ShardTargetIsPath(std::string_view target);

// A content id as manifests write it: "0x" and 16 hex digits.
std::string FormatContentId(std::uint64_t id);

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_SHARDED_H_
