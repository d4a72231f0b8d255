// OpenSource: the one way from a location string to a RowSource. The CLI (pull, export, inspect,
// verify), the Python package and the benchmarks all open tables through it, so a location
// means the same thing everywhere.
//
// A location is, tested in this order:
//   s3://BUCKET/KEY          a table object (OpenObjectSource: only the blocks read are fetched)
//   s3://BUCKET[/PREFIX/]    a bucket or prefix of table objects: table NAME is PREFIX/NAME.emb
//                            (so is s3://BUCKET/PREFIX given with a table name, when PREFIX does
//                            not end in .emb)
//   hdfs://NAMENODE[:PORT]/PATH    the same for HDFS (WebHDFS, objstore/webhdfs.h): a table file,
//                            or with a trailing '/' (or a table name) a folder of NAME.emb files
//   an existing FILE.json    a shard manifest (OpenShardedSource, docs/DEPLOY.md)
//   an existing file         a table file (OpenFileSource)
//   an existing directory    a store directory: table NAME is DIR/NAME.emb
//   a server target          host:port, unix:PATH, unix-abstract:NAME, dns:, ipv4:, ipv6:
//                            (OpenServerSource); anything with a ':' and no '/' counts as one
// Anything else is NotFound. A local path is tested before the target rules, so an existing file
// named "h:1" is a file.
#ifndef EMBSTORE_CLIENT_OPEN_SOURCE_H_
#define EMBSTORE_CLIENT_OPEN_SOURCE_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/client/row_source.h"
#include "embstore/common/status.h"

namespace embstore::client {

enum class LocationKind { kObject, kObjectPrefix, kManifest, kFile, kDirectory, kServer };

// "object", "object prefix", "manifest", "file", "directory", "server".
std::string_view LocationKindName(LocationKind kind);

// What `location` names, by the rules above (looks at the local filesystem; contacts nothing).
// InvalidArgument for a malformed s3:// or hdfs:// address or server target, NotFound when it is
// none of them.
Result<LocationKind> ClassifyLocation(const std::string& location);

// Whether a location of this kind holds several tables (a name picks one) or is one table.
bool HoldsSeveralTables(LocationKind kind);

struct SourceOptions {
  // The table: required for a location that holds several (a directory, a server, an s3
  // prefix or HDFS folder); for one that is a table (a file, an object, a manifest), it must be
  // that table's name when given.
  std::string table;
  // TLS, token, timeouts and load balancing for servers and every shard's server (the target is
  // the location, or each shard's).
  ConnectOptions connect;
  // Servers and shards: read the server's file directly when it is this host's.
  bool allow_local = true;
  // Manifests: open every shard now (OpenShardedSource).
  bool describe_shards = true;
  // Servers: bounds connecting and describing (OpenServerSource).
  std::chrono::milliseconds open_timeout{0};
};

// The logical table of the shard manifest at `manifest_path` (sharded.h): a RowSource whose
// shards are child sources, each opened with OpenSource(shard's target, {.table = shard's table}
// and `options`' connect and allow_local) the first time it is needed, checked against the
// manifest and kept. With options.describe_shards, every shard is opened now, which fills
// desc().has_keys, block_rows and key_bytes (and fails if one cannot be opened); without it,
// nothing is contacted until rows are read, so rows of the shards that are up can be read while
// another is down. CopyRows reads the shards a range overlaps in parallel, each with the read's
// options; a shard on a server that cannot be reached when its part starts is waited for, with
// the read's backoff, for up to max_attempts attempts (kResume events whose `stream` is the
// shard). CopyKeys asks the shards in turn: all keys of shard 0, then the ones it lacked of shard
// 1, and so on.
Result<std::unique_ptr<RowSource>> OpenShardedSource(const std::string& manifest_path,
                                                     const SourceOptions& options = {});

// Whether `location` has the form of a server target: a scheme gRPC knows (unix:, unix-abstract:,
// dns:, ipv4:, ipv6:), or anything with a ':' and no '/' (HOST:PORT). Checked no further: the
// address itself is checked when it is connected to.
bool IsServerTarget(std::string_view location);

// The table at `location` (and options.table), opened and described. Errors name the location
// and, where one was needed or given, the table.
Result<std::unique_ptr<RowSource>> OpenSource(const std::string& location,
                                              const SourceOptions& options = {});

// The s3:// or hdfs:// address of the object OpenSource(location, {.table = table}) reads, for an
// s3:// or hdfs:// location; errors as OpenSource's.
Result<std::string> TableObjectUrl(const std::string& location, const std::string& table);

// The names of the tables at `location`, sorted: a directory's NAME.emb files, a server's tables,
// a prefix's NAME.emb objects (directly under it), or the one table of a file, object or
// manifest. `connect` is used for servers (its target is ignored).
Result<std::vector<std::string>> ListTables(const std::string& location,
                                            const ConnectOptions& connect = {});

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_OPEN_SOURCE_H_
