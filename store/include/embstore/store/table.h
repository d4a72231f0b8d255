// Table: a read-only, memory-mapped table file (docs/FORMAT.md).
//
// Open() maps the whole file read-only (Boost.Interprocess) and validates the header, the embstore
// profile, every tensor's dtype, shape and byte range against the file size, and the key tensors
// before it returns. A truncated, padded or hostile file yields a Corruption status that names the
// file and the field; no later accessor can read out of bounds. Checksums are verified only on
// demand (VerifyRows/VerifyAll, or OpenOptions::verify) since that reads every byte.
//
// Memory: every span and string_view a Table returns points into the mapping and stays valid as
// long as the Table lives; hold the shared_ptr for as long as you use them. Pages are read lazily
// by the kernel, so opening a large table is cheap.
//
// Thread safety: a Table is immutable after Open() (but for the record of blocks already
// verified, which is atomic); all methods are safe to call concurrently.
//
// Files changed underneath: writers in this project only ever publish by rename, which is safe.
// A file truncated or rewritten in place by someone else while mapped would make the kernel
// deliver SIGBUS on access; every Table registers its mapping with MappingGuard
// (embstore/common/mapping_guard.h), so such a read returns zeros instead of killing the process,
// and CheckIntact() reports it. GatherRows, ReadRowsF32 and the Verify* calls check it themselves;
// code that reads spans from RowBytes()/Rows() must call CheckIntact() after using them.
#ifndef EMBSTORE_STORE_TABLE_H_
#define EMBSTORE_STORE_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "embstore/common/mapping_guard.h"
#include "embstore/common/status.h"
#include "embstore/store/dtype.h"

namespace embstore::store {

struct OpenOptions {
  bool verify = false;  // verify every checksum block before returning
};

// How GatherRows writes rows. (Row ranges of a file are read with pread, not through the mapping:
// client::OpenFileSource.)
struct CopyOptions {
  bool to_f32 = false;  // convert F16/BF16 to f32 (SIMD); otherwise the stored bytes
  bool verify = false;  // check the checksum blocks of the rows before copying them
};

// Progress of a long operation: bytes done of bytes total. Return false to cancel.
using ProgressFn = std::function<bool(std::uint64_t done, std::uint64_t total)>;

class Table {
 public:
  static Result<std::shared_ptr<const Table>> Open(const std::string& path,
                                                   const OpenOptions& options = {});
  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const std::string& path() const { return path_; }
  std::uint64_t file_size() const { return file_size_; }
  std::uint64_t rows() const { return rows_; }
  std::uint64_t dim() const { return dim_; }
  DType dtype() const { return dtype_; }
  std::size_t row_bytes() const { return row_bytes_; }
  // File offset of the first matrix byte (a multiple of kDataAlignment).
  std::uint64_t data_offset() const { return data_offset_; }
  int format_version() const { return version_; }
  // The whole file as mapped (header included); valid while the Table lives. For code that must
  // watch the mapping itself, such as a server guarding against the file shrinking under it.
  std::span<const std::byte> mapped_file() const { return {base_, file_size_}; }
  // A descriptor of the mapped file itself (the inode mapped, whatever its path names now), open
  // read-only while the Table lives; for kernel copies of its bytes (TableWriter::AppendMatrixFrom).
  int fd() const;

  // The whole __metadata__ map, embstore.* keys included.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Only the user's keys (those outside the "embstore." prefix).
  std::map<std::string, std::string> user_metadata() const;

  // Bytes of rows [begin, end). InvalidArgument when begin > end, OutOfRange when end > rows().
  Result<std::span<const std::byte>> RowBytes(std::uint64_t begin, std::uint64_t end) const;

  // Typed view of rows [begin, end): T is float for F32 and std::uint16_t for F16/BF16 (their bit
  // patterns). InvalidArgument when T does not match dtype().
  template <typename T>
  Result<std::span<const T>> Rows(std::uint64_t begin, std::uint64_t end) const;

  // Rows [begin, end) converted to f32 into `out` (SIMD). out.size() must be (end-begin)*dim().
  Status ReadRowsF32(std::uint64_t begin, std::uint64_t end, std::span<float> out) const;

  // OK while the mapped bytes can be trusted. Corruption naming the file once a read of the
  // mapping hit a page the file no longer backs (it was truncated or failed to read, and the
  // read saw zeros). One atomic load.
  Status CheckIntact() const;

  // Checksum blocks: block i covers rows [i*block_rows, min((i+1)*block_rows, rows)).
  std::uint64_t block_rows() const { return block_rows_; }
  std::uint64_t num_blocks() const { return num_blocks_; }
  std::uint64_t BlockChecksum(std::uint64_t block) const;  // Precondition: block < num_blocks()

  // Verifies every block that overlaps rows [begin, end). A mismatch is a Corruption status that
  // names the file, the block and its rows.
  Status VerifyRows(std::uint64_t begin, std::uint64_t end) const;
  // The same, but a block that passed once is not hashed again for the life of this Table (the
  // mapping): lookups of scattered rows pay for each touched block once, not once per row.
  Status VerifyRowsOnce(std::uint64_t begin, std::uint64_t end) const;
  // Every block, then the stored row hashes against the rows, then the keys (VerifyKeys).
  Status VerifyAll(const ProgressFn& progress = nullptr) const;
  // Checks `bytes`, the rows of checksum block `block` held somewhere other than this mapping (a
  // download on its way into the file), against the block's checksum: the same check and the
  // same Corruption message as VerifyRows. InvalidArgument when `block` >= num_blocks() or
  // `bytes` is not the block's size.
  Status CheckBlock(std::uint64_t block, std::span<const std::byte> bytes) const;

  // Rows `rows` (any order, repeats allowed) into `out`, one after another, which must hold
  // exactly rows.size() rows of the output type. With options.verify, each row's block is
  // verified first (VerifyRowsOnce). Checks the mapping afterwards (CheckIntact).
  Status GatherRows(std::span<const std::uint64_t> rows, std::span<std::byte> out,
                    const CopyOptions& options = {}) const;

  // Row hashes (docs/FORMAT.md, "Row hashes"): XXH3-64 of each row's bytes, stored by writers
  // that were asked for them (version 3), for delta syncs.
  bool has_row_hashes() const { return row_hashes_ != nullptr; }
  // The stored hash of `row`. Precondition: has_row_hashes() && row < rows(). Unverified: a
  // wrong one can only make a delta sync fetch a row it did not need or skip one, which the sync's
  // block check then catches (client/update.h).
  std::uint64_t StoredRowHash(std::uint64_t row) const;
  // Hashes of rows [begin, end) into `out` (end - begin values): the stored ones when the table
  // has them, else computed from the rows, whose blocks are verified first (VerifyRowsOnce).
  Status RowHashes(std::uint64_t begin, std::uint64_t end, std::span<std::uint64_t> out) const;
  // Checks the stored row hashes of rows [begin, end) against the rows (OK without any):
  // Corruption naming the first row whose hash differs.
  Status VerifyRowHashes(std::uint64_t begin, std::uint64_t end) const;
  // The stored row hashes against the checksum their writer stored with them
  // (kMetaRowHashesChecksum; one pass over 8 bytes a row): true when it matches, false when the
  // table has no row hashes or no such checksum (written before it existed), Corruption naming
  // the file when it does not match. Matching hashes are the writer's: a delta sync may compare
  // rows by them without checking every block of its result (client/update.h).
  Result<bool> CheckRowHashesChecksum() const;
  // Every block (VerifyRowsOnce) and every stored row hash against its row, once per Table: after
  // the first success it returns OK at once. What a server does before it vouches for the row
  // hashes it sends (PROTOCOL.md, "Row hashes").
  Status VerifyRowHashesOnce() const;

  // Keys (only when has_keys()).
  bool has_keys() const { return has_keys_; }
  // The key of `row`. Precondition: has_keys() && row < rows(). Empty, never a view outside the
  // key bytes, when the file was rewritten in place after Open() (callers check CheckIntact()).
  std::string_view Key(std::uint64_t row) const;
  // The row whose key is `key`, or nullopt (also when the table has no keys). O(1) expected.
  // Reads keys.index and keys.bytes unverified: callers that promise verified data call
  // VerifyKeys() first. Corruption, never a hang or a read out of bounds, when the file changed
  // after Open() (truncated in place: CheckIntact's message; or an index that no longer agrees
  // with the keys).
  Result<std::optional<std::uint64_t>> FindKey(std::string_view key) const;
  std::uint64_t key_bytes() const { return key_bytes_size_; }
  // True when the keys carry checksums (format version 2 and later; version 1 keys do not).
  bool keys_checksummed() const { return key_checksums_ != nullptr; }
  // Checks keys.offsets, keys.index and keys.bytes against keys.checksums, once per Table: after
  // the first success it returns OK at once. OK when there is nothing to check (no keys, or a
  // version 1 table: see keys_checksummed()).
  Status VerifyKeys() const;

 private:
  Table() = default;
  struct Mapping;
  Status Parse();
  // Rows [first, last) of checksum block `block` (< num_blocks()).
  std::pair<std::uint64_t, std::uint64_t> BlockRange(std::uint64_t block) const;
  Status VerifyBlock(std::uint64_t block) const;

  std::string path_;
  std::unique_ptr<Mapping> mapping_;
  std::unique_ptr<MappingGuard> guard_;  // after mapping_: unregistered before unmapping
  const std::byte* base_ = nullptr;
  std::uint64_t file_size_ = 0;
  std::uint64_t rows_ = 0;
  std::uint64_t dim_ = 0;
  DType dtype_ = DType::kF32;
  std::size_t row_bytes_ = 0;
  std::uint64_t data_offset_ = 0;
  int version_ = 0;
  std::map<std::string, std::string> metadata_;
  std::uint64_t block_rows_ = 0;
  std::uint64_t block_bytes_ = 0;  // the largest block's size (TableGeometry)
  std::uint64_t num_blocks_ = 0;
  const std::byte* checksums_ = nullptr;
  const std::byte* row_hashes_ = nullptr;  // rows u64 (version 3, optional), else null
  bool has_keys_ = false;
  const std::byte* key_offsets_ = nullptr;  // rows+1 u64, little-endian, unaligned
  const std::byte* key_index_ = nullptr;    // key_slots_ u64
  std::uint64_t key_slots_ = 0;
  const char* key_data_ = nullptr;
  std::uint64_t key_bytes_size_ = 0;
  const std::byte* key_checksums_ = nullptr;  // 3 u64 (version 2), else null
  // What VerifyRowsOnce and VerifyKeys have checked: one bit per block, allocated on first use.
  mutable std::once_flag verified_once_;
  mutable std::unique_ptr<std::atomic<std::uint64_t>[]> verified_;
  mutable std::atomic<bool> keys_verified_{false};
  mutable std::atomic<bool> row_hashes_verified_{false};
};

// The version of a table's content: XXH3-64 of the little-endian u64s (rows, dim, dtype code
// (F32 0, F16 1, BF16 2), block_rows, every block checksum). Two tables with the same ContentId
// hold the same matrix; servers and clients use it to pin a table version (docs/PROTOCOL.md,
// "Versions"). Reads only the checksum tensor.
std::uint64_t ContentId(const Table& table);
// A content id as metadata holds it: 16 lowercase hex digits, no prefix.
std::string ContentIdHex(std::uint64_t content_id);

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_TABLE_H_
