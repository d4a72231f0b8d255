// Whole-object transfers between a local file and an object of any ObjectStore (S3, HDFS), in
// parallel parts, atomic on both sides.
//
// DownloadTable: the table's frame first (FetchTableFrame: header, checksums, keys), then its
// rows in parallel ranged reads of the same object version (ObjectStore::ReadRange of the version
// Stat gave), each part a run of whole checksum blocks that is checked against its checksums as
// it arrives, in memory, before it is written at its offset into a temporary file next to
// `dest`; then the keys. Only a table that passes is renamed onto `dest`. A store that restarts
// mid-download is waited for (the store's retries per part); an object replaced mid-download is
// FailedPrecondition and nothing is published.
//
// UploadFile: ObjectStore::Upload (S3: a multipart upload; HDFS: a temporary file renamed into
// place): the object appears under its key whole or not at all.
#ifndef EMBSTORE_OBJSTORE_TRANSFER_H_
#define EMBSTORE_OBJSTORE_TRANSFER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "embstore/common/status.h"
#include "embstore/objstore/object_store.h"

namespace embstore::objstore {

struct TransferStats {
  std::uint64_t bytes = 0;
  std::string version;  // the version transferred (ObjectInfo::version)
  double seconds = 0;
};

// The bytes of a table object that are not its rows: the header with the length before it, and
// everything after the matrix (checksums, keys), read from version `info.version` (one ranged
// read when the header fits in the first 16 KiB, then the tail). Corruption naming the URL when
// the object cannot be a table (too short, a bad header length, a header that does not give the
// matrix's extent, a matrix past the end). Nothing in it is verified yet: store::Table does that
// once the frame is in a file.
struct TableFrame {
  std::vector<std::byte> head;     // bytes [0, data_offset)
  std::uint64_t data_offset = 0;   // where the matrix starts
  std::uint64_t matrix_bytes = 0;  // the matrix is [data_offset, data_offset + matrix_bytes)
  std::vector<std::byte> tail;     // bytes [data_offset + matrix_bytes, info.size)
  std::uint64_t fetched = 0;       // bytes read from the store, the first read's spare included
  std::map<std::string, std::string> metadata;  // the header's __metadata__ (string values)
  std::uint64_t tail_offset() const { return data_offset + matrix_bytes; }
};
Result<TableFrame> FetchTableFrame(ObjectStore& store, const ObjectUrl& url,
                                   const ObjectInfo& info);

// Writes `frame` into `fd`, a file of the object's `size` bytes: a table whose rows read as zeros
// (sparse), which store::Table opens. Errors name `what`.
Status WriteTableFrame(int fd, const TableFrame& frame, std::uint64_t size,
                       const std::string& what);

Result<TransferStats> DownloadTable(ObjectStore& store, const ObjectUrl& url,
                                    const std::string& dest, const TransferOptions& options = {});
// The same for a caller that has Stat'ed the object and fetched its frame already (to look at
// its header first): the frame is not fetched again, and `bytes` counts the rows fetched here.
Result<TransferStats> DownloadTable(ObjectStore& store, const ObjectUrl& url,
                                    const ObjectInfo& info, const TableFrame& frame,
                                    const std::string& dest, const TransferOptions& options = {});
// Only the bytes, as DownloadTable does them, without the table checks (for any object).
Result<TransferStats> DownloadObject(ObjectStore& store, const ObjectUrl& url,
                                     const std::string& dest, const TransferOptions& options = {});

Result<TransferStats> UploadFile(ObjectStore& store, const std::string& path, const ObjectUrl& url,
                                 const TransferOptions& options = {});

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_TRANSFER_H_
