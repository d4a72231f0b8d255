// s3:// and hdfs:// transfers of whole tables in the CLI. A table written to a bucket (convert) is
// written locally first and then uploaded as one multipart upload, so the object appears whole or
// not at all; a whole object pulled to .emb is one verified download. Everything that reads rows of
// an object goes through client::OpenSource, which fetches only the blocks it reads. Configuration:
// objstore::OpenObjectStore (S3: AWS_* variables and profiles; HDFS: HADOOP_USER_NAME and
// EMBSTORE_HDFS_*).
#ifndef EMBSTORE_CLI_OBJECT_PATHS_H_
#define EMBSTORE_CLI_OBJECT_PATHS_H_

#include <memory>
#include <string>
#include <vector>

#include "embstore/common/atomic_file.h"
#include "embstore/common/status.h"
#include "embstore/objstore/object_store.h"
#include "embstore/objstore/transfer.h"

namespace embstore::cli {

// A fresh private directory under $TMPDIR (or /tmp), "embstore-PURPOSE-XXXXXX", for a download
// or a file on its way to an upload. Removed with everything in it on destruction; on a fatal
// signal (RemoveTempFilesOnSignal), the files named through File() and AtomicFile's temporary
// files are removed, then the directory, so an interrupted command leaves nothing behind.
class ScratchDir {
 public:
  static Result<std::unique_ptr<ScratchDir>> Make(const std::string& purpose);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  // PATH/name, registered for removal on a fatal signal.
  std::string File(const std::string& name);

 private:
  explicit ScratchDir(std::string path);
  std::string path_;
  RemoveOnSignal on_signal_;
  std::vector<std::unique_ptr<RemoveOnSignal>> files_;
};

// Downloads a table object to `dest` (verified, atomic), with a progress line labelled `command`.
Result<objstore::TransferStats> DownloadTableTo(objstore::ObjectStore& store,
                                                const objstore::ObjectUrl& url,
                                                const std::string& dest, bool overwrite,
                                                const std::string& command);

// Uploads the finished local file `local` as `url` (S3: multipart; HDFS: renamed into place;
// atomic), with a progress line.
Result<objstore::TransferStats> UploadTableFrom(const std::string& local, const std::string& url,
                                                const std::string& command);

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_OBJECT_PATHS_H_
