// s3:// table paths in the CLI. A table read from a bucket (inspect, verify, export, pull) is
// downloaded first, with parallel ranged GETs, into a private temporary directory, verified, and
// removed when the command ends; a table written to a bucket (convert) is written locally first
// and then uploaded as one multipart upload, so the object appears whole or not at all.
// Credentials, region and endpoint: objstore::S3ConfigFromEnvironment (AWS_* variables, profiles).
#ifndef EMBSTORE_CLI_OBJECT_PATHS_H_
#define EMBSTORE_CLI_OBJECT_PATHS_H_

#include <memory>
#include <string>
#include <vector>

#include "embstore/common/atomic_file.h"
#include "embstore/common/status.h"
#include "embstore/objstore/s3.h"
#include "embstore/objstore/transfer.h"

namespace embstore::cli {

// An S3 client configured from the environment.
Result<std::unique_ptr<objstore::S3Client>> S3FromEnvironment();

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

// A local path for a table argument: the argument itself, or, for s3://, a verified download
// that is deleted with this object.
class LocalTable {
 public:
  // `command` labels the progress line; `verify` checks every block of a download before use.
  static Result<std::unique_ptr<LocalTable>> Fetch(const std::string& arg,
                                                   const std::string& command, bool verify = true);
  ~LocalTable();
  LocalTable(const LocalTable&) = delete;
  LocalTable& operator=(const LocalTable&) = delete;

  const std::string& path() const { return path_; }
  const std::string& name() const { return arg_; }  // what the user gave
  bool downloaded() const { return downloaded_; }
  // Removes the download once the command has opened it (its descriptor and mapping keep the
  // data), so an interrupted command leaves nothing behind. Also done on destruction.
  void Unlink();
  // `st` with the download's temporary path replaced by the s3:// address, for messages.
  Status Named(const Status& st) const;
  std::string Named(const std::string& message) const;

 private:
  LocalTable(std::string arg, std::string path, std::unique_ptr<ScratchDir> scratch)
      : arg_(std::move(arg)), path_(std::move(path)), downloaded_(scratch != nullptr),
        scratch_(std::move(scratch)) {}
  std::string arg_, path_;
  bool downloaded_;
  std::unique_ptr<ScratchDir> scratch_;  // the download's; null for a local path or once unlinked
};

// Downloads a table object to `dest` (verified, atomic), with a progress line labelled `command`.
Result<objstore::TransferStats> DownloadTableTo(objstore::S3Client& s3, const objstore::S3Url& url,
                                                const std::string& dest, bool overwrite,
                                                const std::string& command);

// Uploads the finished local file `local` as `url` (multipart, atomic), with a progress line.
Result<objstore::TransferStats> UploadTableFrom(const std::string& local, const std::string& url,
                                                const std::string& command);

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_OBJECT_PATHS_H_
