// Delta syncs: bring a copy of a table up to the version a source holds by fetching only the rows
// that differ (docs/CLIENT.md, "Updating a copy").
//
// Both ways compare the source's RowDigest (each row's XXH3-64 and each block's checksum, of the
// version the source pinned) with the copy's own rows, fetch the rows whose hashes differ
// (RowSource::HoldRowIds, each row checked, left where it arrived), and then check every checksum
// block of the result against the source's block checksums; a block that still differs (a hash
// collision, a copy damaged in memory) is fetched whole. So the result is the source's version,
// verified, whatever the copy held. That last check is left out when the source's row hashes are
// trusted (RowDigest::verified: a server computed them from verified rows, or the table stores
// them with a checksum that matches): each row is then the source's by its hash. Without row
// hashes at the source (an object whose table stores none), whole blocks whose checksums differ
// are fetched instead.
//
// A source that changes version mid-sync is FailedPrecondition (the source pins its version), and
// the copy is left as it was.
#ifndef EMBSTORE_CLIENT_UPDATE_H_
#define EMBSTORE_CLIENT_UPDATE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "embstore/client/row_source.h"
#include "embstore/common/status.h"

namespace embstore::client {

struct UpdateStats {
  bool up_to_date = false;    // the copy already held this version: nothing fetched or written
  // The copy could not be synced by rows (its shape or dtype differ, the source has no digest):
  // `full_reason` says why; UpdateFile did nothing, and the caller fetches the whole table.
  bool needs_full = false;
  std::string full_reason;
  bool by_rows = true;        // compared row by row (false: by checksum blocks)
  std::uint64_t rows = 0;
  std::uint64_t changed_rows = 0;      // rows fetched
  std::uint64_t refetched_blocks = 0;  // blocks fetched whole after the block check
  std::uint64_t delta_rows = 0;  // of changed_rows, those taken from a delta object (S3, HDFS)
  std::uint64_t digest_bytes = 0;      // bytes of row hashes and checksums brought here
  std::uint64_t row_bytes_moved = 0;   // bytes of rows (and keys) brought here
  std::uint64_t table_bytes = 0;       // the matrix's size, for the ratio
  std::uint64_t content_id = 0;        // the version the copy now holds
  // UpdateFile: the new file shares the unchanged rows' extents with the old one (a reflink), so
  // only the changed rows' pages were written; false: the kernel copied the matrix.
  bool shared_extents = false;
  double seconds = 0;
  // Where `seconds` went: the copy hashed and the source's digest brought (the two overlap), the
  // changed rows fetched, every block of the result checked (and any refetched), and (UpdateFile)
  // the new file written and made durable.
  double digest_seconds = 0;
  double fetch_seconds = 0;
  double check_seconds = 0;
  double write_seconds = 0;
  std::uint64_t moved() const { return digest_bytes + row_bytes_moved; }
};

// A copy's row hashes (XXH3-64 of each row), computed in the background from the moment Start
// returns: a caller that still has to open the source (connect, describe the table) starts them
// first, so that hashing the copy, most of an in-memory sync's work, overlaps that. Hand it to
// UpdateInPlace with the same bytes; destroying it unused stops the hashing.
class CopyHashes {
 public:
  // `rows` stays valid and unchanged until the CopyHashes is destroyed or handed over.
  static std::unique_ptr<CopyHashes> Start(std::span<const std::byte> rows,
                                           std::size_t row_bytes);
  ~CopyHashes();
  CopyHashes(const CopyHashes&) = delete;
  CopyHashes& operator=(const CopyHashes&) = delete;

  // Whether these are the hashes of `rows` cut into rows of `row_bytes` bytes.
  bool Covers(std::span<const std::byte> rows, std::size_t row_bytes) const;

  class Hasher;  // private to update.cc

 private:
  explicit CopyHashes(std::unique_ptr<Hasher> hasher);
  friend Result<UpdateStats> UpdateInPlace(RowSource&, std::span<std::byte>, const ReadOptions&,
                                           std::unique_ptr<CopyHashes>);
  std::unique_ptr<Hasher> hasher_;
};

// `rows` holds the source table's rows x row_bytes bytes in its own dtype (an earlier version);
// afterwards it holds the source's version. needs_full when the sizes differ or the source has no
// digest (rows untouched). On error `rows` is left as it was: fetched rows are applied only
// once every block of the result has passed. `started`: the copy's hashes begun earlier
// (CopyHashes::Start on these bytes); used when they cover `rows` at the table's row size.
Result<UpdateStats> UpdateInPlace(RowSource& source, std::span<std::byte> rows,
                                  const ReadOptions& options = {},
                                  std::unique_ptr<CopyHashes> started = nullptr);

struct UpdateFileOptions {
  ReadOptions read;
  bool durable = true;  // fsync the new file before it replaces the old one
};

// `path` is a table file holding an earlier version; a new file with the source's version (its
// rows, keys, block size and user metadata; row hashes stored) is written next to it and renamed
// over it, so readers of `path` see the old file or the new one, never a mix. The new file starts as
// the old one's matrix moved by the kernel (extents shared where the filesystem reflinks: XFS,
// btrfs), then the changed rows are written over it; only those pass through this process. needs_full when the
// file's shape or dtype differ from the source's or the source has no digest: nothing is written.
Result<UpdateStats> UpdateFile(RowSource& source, const std::string& path,
                               const UpdateFileOptions& options = {});

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_UPDATE_H_
