// Whole-object transfers between a local file and an S3 object, in parallel parts, atomic on
// both sides.
//
// DownloadTable: ranged GETs of one object version (pinned by its ETag with If-Match) written at
// their offsets into a temporary file next to `dest`; every checksum block and the keys are then
// verified (store::Table) and only a table that passes is renamed onto `dest`. A store that
// restarts mid-download is waited for (S3Config::max_attempts per part); an object replaced
// mid-download is FailedPrecondition and nothing is published.
//
// UploadFile: a multipart upload of the file's bytes; the object appears under its key only when
// the last part is in and the upload completes (readers see the old object or the whole new
// one); any failure aborts the upload.
#ifndef EMBSTORE_OBJSTORE_TRANSFER_H_
#define EMBSTORE_OBJSTORE_TRANSFER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "embstore/common/status.h"
#include "embstore/objstore/s3.h"

namespace embstore::objstore {

struct TransferOptions {
  int parallel = 8;                         // parts in flight
  std::uint64_t part_bytes = 16ull << 20;   // at least 5 MiB for uploads (S3's minimum part)
  bool overwrite = false;                   // downloads: replace an existing `dest`
  bool verify = true;                       // downloads: check every block before publishing
  // Bytes done of total; return false to cancel (Cancelled). Called from the calling thread.
  std::function<bool(std::uint64_t done, std::uint64_t total)> progress;
};

struct TransferStats {
  std::uint64_t bytes = 0;
  std::string etag;  // the version transferred
  double seconds = 0;
};

Result<TransferStats> DownloadTable(S3Client& s3, const S3Url& url, const std::string& dest,
                                    const TransferOptions& options = {});
// Only the bytes, as DownloadTable does them, without the table checks (for any object).
Result<TransferStats> DownloadObject(S3Client& s3, const S3Url& url, const std::string& dest,
                                     const TransferOptions& options = {});

Result<TransferStats> UploadFile(S3Client& s3, const std::string& path, const S3Url& url,
                                 const TransferOptions& options = {});

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_TRANSFER_H_
