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
  // UpdateFile with `spare`: the spare was patched in place and swapped in (false: a new file was
  // written, and `spare_note` says why the spare was not used).
  bool used_spare = false;
  std::string spare_note;
  // Of the rows where the spare differed from the source's version, those taken from the file it
  // replaced (which held them already) rather than fetched: the rows of the sync before.
  std::uint64_t spare_rows = 0;
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
  // Keep the version replaced as a hidden spare beside the file (SparePath), and bring the spare
  // up to date in place at the next sync instead of writing a new file (docs/CLIENT.md, "Spares"):
  // twice the disk, and a sync that writes only the rows that differ.
  bool spare = false;
};

// Where UpdateFile keeps the spare of `path`: ".NAME.spare" in its directory.
std::string SparePath(const std::string& path);

// A sync of a file begun before its source is opened (PrepareUpdateFile): the file opened and,
// with options.spare, its spare taken and hashed in the background, so that the hashing overlaps
// connecting to the source and describing the table, as CopyHashes does for a copy in memory.
// Hand it to UpdateFile; destroying it unused stops the hashing and lets the spare go.
class PreparedFile {
 public:
  ~PreparedFile();
  PreparedFile(const PreparedFile&) = delete;
  PreparedFile& operator=(const PreparedFile&) = delete;

  struct State;  // private to update.cc

 private:
  explicit PreparedFile(std::unique_ptr<State> state);
  friend Result<std::unique_ptr<PreparedFile>> PrepareUpdateFile(const std::string&,
                                                                 const UpdateFileOptions&);
  friend Result<UpdateStats> UpdateFile(RowSource&, std::unique_ptr<PreparedFile>);
  std::unique_ptr<State> state_;
};

Result<std::unique_ptr<PreparedFile>> PrepareUpdateFile(const std::string& path,
                                                        const UpdateFileOptions& options = {});

// `path` is a table file holding an earlier version; a new file with the source's version (its
// rows, keys, block size and user metadata; row hashes stored) is written next to it and renamed
// over it, so readers of `path` see the old file or the new one, never a mix. The new file starts as
// the old one's matrix moved by the kernel (extents shared where the filesystem reflinks: XFS,
// btrfs), then the changed rows are written over it; only those pass through this process. needs_full when the
// file's shape or dtype differ from the source's or the source has no digest: nothing is written.
//
// With options.spare, the new version is written into the spare instead, when there is one of
// the same shape that no other process has open or mapped (AtomicFile::AdoptSpare): the spare's
// rows are hashed as a copy's are; where they differ from the source's, the row is taken from
// `path` when it holds the source's (its hash matches) and fetched otherwise; the spare is
// patched, and swapped with `path`, which becomes the spare. Anything else (no spare, one in use,
// a header of another size, someone opening the spare meanwhile) writes a new file as above, and
// the replaced file becomes the spare.
Result<UpdateStats> UpdateFile(RowSource& source, const std::string& path,
                               const UpdateFileOptions& options = {});
// The same, for a sync begun with PrepareUpdateFile.
Result<UpdateStats> UpdateFile(RowSource& source, std::unique_ptr<PreparedFile> prepared);

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_UPDATE_H_
