// ObjectStore: what embstore needs of a remote place that keeps tables as whole files or objects
// (S3 and S3-compatible stores, HDFS over WebHDFS), so that reading rows of a table, downloading
// it, uploading it and mirroring a folder of tables are written once, for every store.
//
// Locations are URLs SCHEME://AUTHORITY/KEY:
//   s3://BUCKET/KEY                 S3Client (s3.h): AWS_* variables and profiles
//   hdfs://NAMENODE[:PORT]/PATH     WebHdfsClient (webhdfs.h): PORT is the NameNode's HTTP
//                                   (WebHDFS) port, 9870 when not given; HADOOP_USER_NAME etc.
// A KEY that is empty or ends in '/' names a prefix (a bucket, a folder) rather than one object.
//
// Versions: Stat() returns an opaque version string that changes whenever the object is replaced
// (S3: the ETag; HDFS: the file's inode id). ReadRange() reads bytes of that version only, and
// fails with FailedPrecondition, never bytes of another version, once it was replaced: a table
// read in many ranges is one version or an error.
//
// Thread safety: an ObjectStore may be used from many threads at once.
#ifndef EMBSTORE_OBJSTORE_OBJECT_STORE_H_
#define EMBSTORE_OBJSTORE_OBJECT_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/common/status.h"

namespace embstore::objstore {

struct ObjectUrl {
  std::string scheme;     // "s3", "hdfs"
  std::string authority;  // the bucket; the NameNode's host[:port]
  std::string key;        // the object key or path below the authority, without a leading '/'
  std::string ToString() const;
  // Whether it names a bucket, folder or prefix ("s3://B", "hdfs://nn/DIR/") rather than an
  // object.
  bool NamesPrefix() const { return key.empty() || key.back() == '/'; }
};

// Whether `s` starts with a scheme an ObjectStore serves (s3://, hdfs://).
bool IsObjectUrl(std::string_view s);
// InvalidArgument naming `s` when it is not a well-formed URL of a known store.
Result<ObjectUrl> ParseObjectUrl(std::string_view s);
// ParseObjectUrl, and InvalidArgument "'s' names a bucket or prefix, not <what>" unless it names
// an object (`what`: "a table object", "an object key").
Result<ObjectUrl> ParseObjectKeyUrl(std::string_view s, std::string_view what);

struct ObjectInfo {
  std::string key;  // as ObjectUrl::key
  std::uint64_t size = 0;
  std::string version;  // S3: the ETag as sent (quotes included); HDFS: the inode id
};

// Whole-object transfers (transfer.h) and uploads.
struct TransferOptions {
  int parallel = 8;                        // parts in flight
  std::uint64_t part_bytes = 16ull << 20;  // at least 5 MiB for S3 uploads (S3's minimum part)
  bool overwrite = false;                  // downloads: replace an existing `dest`
  bool verify = true;                      // downloads: check every block before publishing
  // Downloads: fsync the file before it is published; false for a scratch copy that does not
  // outlive the process (a sync's delta object), where waiting for the disk buys nothing.
  bool durable = true;
  // Bytes done of total; return false to cancel (Cancelled). Called from the calling thread.
  std::function<bool(std::uint64_t done, std::uint64_t total)> progress;
};

// A getenv: configurations are read through one so that tests can give their own environment.
using GetEnv = std::function<const char*(const char*)>;

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Size and version of the object. NotFound when there is none; an HDFS directory is
  // InvalidArgument ("is a directory").
  virtual Result<ObjectInfo> Stat(const ObjectUrl& url) = 0;
  // Bytes [offset, offset + out.size()) of version `version` (from Stat) into `out`.
  // FailedPrecondition when the object was replaced or removed since.
  virtual Status ReadRange(const ObjectUrl& url, const std::string& version, std::uint64_t offset,
                           std::span<std::byte> out) = 0;
  // The objects whose keys start with `prefix.key`: for S3 every key below it; for HDFS the
  // files (not folders) directly in the folder it names, or, when the key does not end in '/',
  // those of its parent folder whose names start with its last part.
  virtual Result<std::vector<ObjectInfo>> List(const ObjectUrl& prefix) = 0;
  // Writes the local file `path` as `url`, replacing what is there: readers see the old object or
  // the whole new one, never a part (S3: a multipart upload; HDFS: a temporary file renamed into
  // place). Any failure leaves the old object as it was. Returns the new version.
  virtual Result<std::string> Upload(const std::string& path, const ObjectUrl& url,
                                     const TransferOptions& options) = 0;
  // Removes the object; one that is not there is not an error.
  virtual Status Delete(const ObjectUrl& url) = 0;
};

// The store for `url`'s scheme, configured from the process's environment (S3: s3.h's
// S3ConfigFromEnvironment; HDFS: webhdfs.h's HdfsConfigFromEnvironment).
Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const ObjectUrl& url);

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_OBJECT_STORE_H_
