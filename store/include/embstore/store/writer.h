// TableWriter: streams rows into a new table file (docs/FORMAT.md) and publishes it atomically.
//
// Rows are appended in order, already encoded in the table's dtype or as f32 to be converted; the
// matrix is never held in memory and the row count need not be known until Finish(). Keys, when
// the table has them, are appended separately and are kept in memory (about their byte size plus
// 24 bytes a key) until Finish() writes them and their index.
//
// Keyed rows (AppendKeyedRows) are checked for repeated keys as they come, under the options'
// DuplicateKeyPolicy.
//
// Everything is written to a temporary file in the destination's directory (".NAME.tmp-XXXXXX").
// Finish() fills in the header, writes checksums and keys, fsyncs, and renames the temporary file
// onto the final path; only then does the table exist under its name. Without `overwrite`, an
// existing destination is an AlreadyExists error, both at Create() and at Finish() (no-clobber
// rename). Abort(), the destructor of an unfinished writer, and any failed call remove the
// temporary file, so a failure never leaves a half-written table or a stray temporary behind.
//
// Not thread-safe: one thread drives a writer. (Full 4 MiB buffers are written on a thread of
// the writer's own, one at a time, while the caller fills the next; an error there surfaces
// from the next call that writes, or from Finish(). An append of 4 MiB or more is written by
// the caller while that thread hashes it.)
#ifndef EMBSTORE_STORE_WRITER_H_
#define EMBSTORE_STORE_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embstore/common/atomic_file.h"
#include "embstore/common/status.h"
#include "embstore/store/dtype.h"

namespace embstore::store {

// Where the table's data came from; recorded in the metadata ("embstore.source.*").
struct SourceInfo {
  std::string name;             // file name as given, e.g. "vectors.txt.gz" or "-" for stdin
  std::uint64_t size = 0;       // bytes
  std::int64_t mtime_unix = 0;  // seconds since the epoch
};

// What a keyed append does with a key that repeats an earlier row's key.
enum class DuplicateKeyPolicy : std::uint8_t {
  kError,  // refuse it (AppendKeyedRows says which row it repeats)
  kFirst,  // keep the earlier row, drop the new one
  kLast,   // overwrite the earlier row with the new one, in place
};

struct WriterOptions {
  DType dtype = DType::kF32;
  std::uint64_t dim = 0;         // required: values per row, > 0
  bool with_keys = false;        // every row gets exactly one key (AppendKeys)
  // Store each row's XXH3-64 (docs/FORMAT.md, "Row hashes"; format version 3), so a later
  // version can be synced by the rows that changed. Kept in memory until Finish(): 8 bytes a row.
  bool row_hashes = false;
  bool overwrite = false;        // replace an existing file at the path, on success only
  std::uint64_t block_rows = 0;  // rows per checksum block; 0 picks DefaultBlockRows()
  // For AppendKeyedRows (with_keys): what a repeated key does.
  DuplicateKeyPolicy on_duplicate_key = DuplicateKeyPolicy::kError;
  // fsync the table before publishing it (AtomicFile::Commit): it survives a machine crash once
  // Finish() returns. false skips that wait; the table still appears whole or not at all.
  bool durable = true;
  // The rows the caller expects to append, when it knows (0: unknown). A hint: the file's space is
  // reserved up front (AtomicFile::Preallocate), which makes the writes faster and a full disk
  // fail before any data is written; appending more or fewer rows is still correct.
  std::uint64_t expected_rows = 0;
  std::optional<SourceInfo> source;
  // A delta table (docs/FORMAT.md, "Deltas"): the rows of version `of` that differ from version
  // `base`, recorded as embstore.delta.of and embstore.delta.base.
  struct DeltaOf {
    std::uint64_t of = 0;    // content id of the version the rows belong to
    std::uint64_t base = 0;  // content id of the version they replaced
  };
  std::optional<DeltaOf> delta_of;
  std::string creator;  // default: "embstore <version>"
  // At Finish, the file the path held before lives on under this name instead of being freed
  // (AtomicFile::KeepReplacedAs): a spare for the next delta sync (docs/CLIENT.md, "Spares").
  std::string keep_replaced;
  // User metadata, stored verbatim. Keys must be non-empty and must not start with "embstore.".
  std::map<std::string, std::string> metadata;
};

class TableWriter {
 public:
  // Validates the options, checks the destination directory, and creates the temporary file.
  static Result<std::unique_ptr<TableWriter>> Create(const std::string& path,
                                                     const WriterOptions& options);

  // A writer whose file is an adopted spare (AtomicFile::AdoptSpare) that already holds a matrix
  // of the right shape at `data_offset` (MatrixInPlace); Finish swaps it with `path`.
  // FailedPrecondition when these options put the matrix elsewhere (a header of another size):
  // the spare cannot be written in place.
  static Result<std::unique_ptr<TableWriter>> Adopt(const std::string& path,
                                                    const WriterOptions& options,
                                                    std::unique_ptr<AtomicFile> spare,
                                                    std::uint64_t data_offset);

  ~TableWriter();  // Abort()s an unfinished writer.
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  // Appends whole rows already encoded in the table's dtype, little-endian.
  // Precondition-checked: encoded.size() is a multiple of the row size in bytes.
  Status AppendRows(std::span<const std::byte> encoded);

  // Appends whole rows given as f32, converting to the table's dtype (round to nearest even).
  // With OverflowPolicy::kError a finite value too large for F16/BF16 is an OutOfRange error
  // naming its row and column.
  Status AppendRowsF32(std::span<const float> values,
                       OverflowPolicy overflow = OverflowPolicy::kInfinity);

  // Appends rows (encoded in the table's dtype) with their keys, one key a row, and owns the
  // duplicate-key policy (options.on_duplicate_key): keys are indexed as they come, so a key
  // that repeats an earlier row's is dropped (kFirst), overwrites that row in place (kLast), or
  // stops the call (kError): the rows before it are appended and `refused` says which key of
  // this call repeats which row, for the caller to report in its own terms (a line, a byte
  // offset). Only when options.with_keys; do not mix with AppendKeys.
  struct KeyedAppend {
    std::uint64_t duplicates = 0;  // rows dropped (kFirst) or merged into earlier rows (kLast)
    struct Refused {
      std::size_t index = 0;        // into this call's keys
      std::uint64_t first_row = 0;  // the appended row whose key it repeats
    };
    std::optional<Refused> refused;
  };
  Result<KeyedAppend> AppendKeyedRows(std::span<const std::byte> encoded,
                                      std::span<const std::string_view> keys);

  // The whole matrix at once from another file, for a table that is an earlier one with a few
  // rows changed (a delta sync): `rows` rows encoded in this table's dtype lie in `fd` at byte
  // `offset`. The kernel moves them: the extents are shared with the other file where the
  // filesystem can (a reflink, FICLONERANGE: XFS, btrfs; nothing is copied until either file
  // changes), else copied by copy_file_range, so the bytes never pass through this process.
  // PatchRows then writes the rows that changed. The caller computed (and checked) the final
  // block checksums and row hashes; they are stored as given, so nothing is read back. Only on a
  // writer with no rows yet; rows cannot be appended after it. Sizes are checked: `checksums`
  // holds one per block, `row_hashes` one per row (ignored without options.row_hashes). Where
  // the extents are shared, `fd` must stay open while PatchRows is called: it reads the
  // unchanged rows around a changed one from it.
  Status AppendMatrixFrom(int fd, std::uint64_t offset, std::uint64_t rows,
                          std::vector<std::uint64_t> checksums,
                          std::vector<std::uint64_t> row_hashes);
  // For an adopted spare: its matrix is `rows` rows where they lie, to be patched into the
  // version whose `checksums` and `row_hashes` are given (stored as given, as for
  // AppendMatrixFrom), by PatchRows or by the caller through a mapping of the file.
  Status MatrixInPlace(std::uint64_t rows, std::vector<std::uint64_t> checksums,
                       std::vector<std::uint64_t> row_hashes);
  // Writes rows [first_row, first_row + n) of a matrix given by AppendMatrixFrom, bytes only.
  // Over shared extents the rows go out in whole filesystem blocks, the unchanged bytes around
  // them read from the other file (consecutive calls in row order join into one write): a write
  // of part of a shared block makes the filesystem read the block first, one synchronous read
  // per changed row.
  Status PatchRows(std::uint64_t first_row, std::span<const std::byte> encoded);
  // Whether AppendMatrixFrom shared the extents (false: the kernel copied the bytes).
  bool matrix_shared() const { return matrix_shared_; }
  // Appends keys, one per row, in row order. Only when options.with_keys. Keys must be 1 to
  // kMaxKeyBytes bytes; uniqueness is checked at Finish() (AlreadyExists naming both rows).
  Status AppendKeys(std::span<const std::string_view> keys);
  Status AppendKey(std::string_view key) { return AppendKeys({&key, 1}); }

  // Writes checksums, keys and the header, fsyncs and publishes the file.
  // Fails (and removes the temporary file) when keys were asked for and their count differs from
  // the row count.
  Status Finish();

  // Drops everything written so far and removes the temporary file. Idempotent.
  void Abort();

  std::uint64_t rows() const { return rows_; }
  std::uint64_t dim() const { return options_.dim; }
  DType dtype() const { return options_.dtype; }
  std::size_t row_bytes() const { return row_bytes_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  struct Hasher;  // streaming XXH3 state of the current checksum block
  class Helper;  // runs one job at a time on a thread of its own (writer.cc)
  TableWriter(std::string path, WriterOptions options);
  Status Init(std::unique_ptr<AtomicFile> spare = nullptr, std::uint64_t spare_data_offset = 0);
  Status GivenMatrix(std::uint64_t rows, std::vector<std::uint64_t> checksums,
                     std::vector<std::uint64_t> row_hashes);
  Helper& Help();  // helper_, started on first use
  Status FlushBuffer();
  // Matrix bytes at `offset` of the file (with `durable`, their writeback started).
  Status WriteMatrix(std::uint64_t offset, std::span<const std::byte> bytes);
  // Waits for the helper's job, if any: before any other write or read of the file, and before
  // any use of the hashing state.
  Status WaitHelper();
  void HashAppended(std::span<const std::byte> encoded);  // row hashes and block checksums
  void HashBlocks(std::span<const std::byte> encoded);    // block checksums only
  Status Fail(Status st);  // Abort()s and returns st
  Status WriteTail(std::uint64_t data_end, std::uint64_t* end);
  // Rewrites rows that were appended earlier (a later duplicate key winning, kLast).
  Status OverwriteRows(std::uint64_t first_row, std::span<const std::byte> encoded);
  // The row holding `key` among the keys appended so far (the live index of AppendKeyedRows).
  std::optional<std::uint64_t> FindAppendedKey(std::string_view key, std::uint64_t hash) const;
  void IndexAppendedKey(std::uint64_t row, std::uint64_t hash);

  std::string path_;
  WriterOptions options_;
  std::unique_ptr<AtomicFile> file_;
  std::string temp_path_;
  bool finished_ = false;
  std::size_t row_bytes_ = 0;
  std::uint64_t rows_ = 0;
  std::uint64_t block_rows_ = 0;
  std::uint64_t data_start_ = 0;  // file offset of the matrix, reserved at Create()
  std::vector<std::pair<std::string, std::string>> metadata_;  // header __metadata__
  std::string buffer_;              // pending matrix bytes, written at data_start_ + flushed_
  std::string writing_;             // a full buffer the helper is writing
  std::uint64_t flushed_ = 0;       // matrix bytes handed to the file (or to the helper)
  std::unique_ptr<Helper> helper_;  // started at the first full buffer or large append
  std::unique_ptr<Hasher> hasher_;  // checksum of the block being appended
  std::uint64_t block_fill_ = 0;    // bytes of the current block hashed so far
  std::vector<std::uint64_t> checksums_;
  std::vector<std::uint64_t> row_hashes_;  // options_.row_hashes: one per appended row
  std::vector<std::uint64_t> dirty_blocks_;  // rewritten by OverwriteRows; rehashed at Finish
  bool adopted_ = false;        // the file is a spare written in place (Adopt)
  bool matrix_given_ = false;   // AppendMatrixFrom: checksums and row hashes came with it
  bool matrix_shared_ = false;  // ... and its extents are shared with the file they came from
  // PatchRows over shared extents: the pending run of whole blocks `patch_` at file offset
  // `patch_at_`, the source of the unchanged bytes (`source_fd_`, its matrix at
  // `source_offset_`), the block size, and the end of what was written so far.
  int source_fd_ = -1;
  std::uint64_t source_offset_ = 0;
  std::uint64_t fs_block_ = 0;
  std::uint64_t patch_at_ = 0;
  std::vector<std::byte> patch_;
  std::uint64_t patched_end_ = 0;
  Status FlushPatch();
  Status ReadSource(std::uint64_t file_offset, std::span<std::byte> out);
  std::string key_bytes_;
  std::vector<std::uint64_t> key_ends_;  // end offset of each key in key_bytes_
  // AppendKeyedRows' open-addressing index of the keys so far (row numbers, kEmptySlot where
  // empty), at most half full; rebuilt from key_bytes_ when it grows.
  std::vector<std::uint64_t> live_index_;
};

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_WRITER_H_
