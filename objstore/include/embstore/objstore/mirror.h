// TableMirror: keeps a local cache directory in step with the *.emb objects under an object store
// prefix (an S3 prefix, an HDFS folder), for `embstore serve --store s3://BUCKET/PREFIX --cache
// DIR` and `--store hdfs://NAMENODE/DIR`.
//
// Each sync lists the prefix (not its sub-prefixes) and downloads every table object whose version
// (ObjectInfo::version: the S3 ETag, the HDFS inode id) differs from the cached copy's
// (DownloadTable: parallel ranged reads of one version, every block
// verified, then an atomic rename onto DIR/NAME.emb), so the server, which watches DIR, only ever
// sees whole verified tables and picks up a new version as it picks up a renamed file. A cached
// table whose object is gone is removed. The version of each cached table is kept next to it
// (DIR/.NAME.emb.etag, named so since S3 came first), so a restarted server reuses its cache
// instead of downloading again.
//
// Thread safety: Sync() and the background thread (Start/Stop) must not overlap; Start() runs
// Sync() every `interval` on its own thread until Stop() or destruction.
#ifndef EMBSTORE_OBJSTORE_MIRROR_H_
#define EMBSTORE_OBJSTORE_MIRROR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "embstore/common/status.h"
#include "embstore/objstore/object_store.h"

namespace embstore::objstore {

struct MirrorEvent {
  enum class Kind { kFetched, kRemoved, kFailed, kUnchanged } kind = Kind::kUnchanged;
  std::string object;   // s3://... or hdfs://...
  std::string path;     // the cache file
  std::string version;  // ObjectInfo::version
  std::uint64_t bytes = 0;
  double seconds = 0;
  Status error;  // kFailed
};

struct MirrorOptions {
  std::chrono::milliseconds interval{60000};
  int parallel = 8;  // ranged GETs in flight per table
  std::function<void(const MirrorEvent&)> on_event;
};

struct SyncResult {
  int fetched = 0, removed = 0, failed = 0, unchanged = 0;
};

class TableMirror {
 public:
  // InvalidArgument when `prefix` is not a bucket or prefix address or `cache_dir` cannot be
  // created.
  static Result<std::unique_ptr<TableMirror>> Create(std::unique_ptr<ObjectStore> store,
                                                     ObjectUrl prefix, std::string cache_dir,
                                                     MirrorOptions options);
  ~TableMirror();

  // One pass. A listing failure is the returned Status; a table that fails to download is an
  // event (kFailed) and keeps its previous cached copy, if any.
  Result<SyncResult> Sync();
  void Start();
  void Stop();

  const std::string& cache_dir() const { return dir_; }

 private:
  TableMirror(std::unique_ptr<ObjectStore> store, ObjectUrl prefix, std::string dir,
              MirrorOptions o);
  void Emit(const MirrorEvent& e) const;

  std::unique_ptr<ObjectStore> store_;
  ObjectUrl prefix_;
  std::string dir_;
  MirrorOptions options_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
};

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_MIRROR_H_
