#include "embstore/store/writer.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <ctime>
#include <mutex>
#include <thread>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "embstore/common/read_file.h"
#include "embstore/common/timestamp.h"
#include "embstore/store/checksum.h"
#include "embstore/store/format.h"
#include "embstore/store/table.h"
#include "header.h"

namespace embstore::store {

struct TableWriter::Hasher {
  XXH3_state_t state;
};

// One job at a time runs on this thread while the caller goes on, and the caller waits for it
// before it touches what the job uses. Two kinds of job:
//   - a full buffer written to the file while the caller fills the next (for a converter on one
//     core, the kernel's copy into the page cache is about a tenth of its time);
//   - the hashing of a large append (row hashes, block checksums) while the caller writes it.
//     The caller, not this thread, copies into the page cache: on a VM, pages freed by the
//     caller's CPU (the trainer's own memory, a table it just deleted) are the cheap ones to
//     reuse, and a write from the other CPU took 0.08 to 0.58 s for the same 488 MB where the
//     caller's own write took 0.07 s every time (ext4, 2 vCPUs).
// The first error of any job is kept and returned by every later Submit and Wait.
class TableWriter::Helper {
 public:
  Helper() : thread_([this] { Run(); }) {}
  ~Helper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // after the job in flight, if any
  }

  // Waits for the job in flight, then starts `job`; what it uses must stay valid and untouched
  // by the caller until Wait() returns. Fails with an earlier job's error (then `job` never runs).
  Status Submit(std::function<Status()> job) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !busy_; });
    if (!status_.ok()) return status_;
    job_ = std::move(job);
    busy_ = true;
    lock.unlock();
    cv_.notify_all();
    return Status::OK();
  }

  // Waits until no job runs; the first error of any job.
  Status Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !busy_; });
    return status_;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || busy_; });
      if (!busy_) return;  // stop_, nothing pending
      lock.unlock();
      Status st = job_();
      lock.lock();
      if (!st.ok() && status_.ok()) status_ = st;
      job_ = nullptr;
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<Status()> job_;
  bool busy_ = false;
  bool stop_ = false;
  Status status_;
  std::thread thread_;  // last: starts once the members above exist
};

namespace {

constexpr std::size_t kBufferBytes = 4u << 20;

std::uint64_t KeySlotsFor(std::uint64_t rows) {
  // A load factor of at most 1/2 keeps linear probing short; at least one slot always stays empty
  // so a lookup always terminates (docs/FORMAT.md, "Keys").
  return std::max<std::uint64_t>(2, std::bit_ceil(rows * 2));
}

void PutU64(std::string& out, std::uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);  // little-endian host (static_assert in dtype.cc)
  out.append(b, 8);
}

std::span<const std::byte> AsBytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::span<const std::byte> AsBytes(const std::vector<std::uint64_t>& v) {
  return std::as_bytes(std::span<const std::uint64_t>(v));
}

// The header's tensor list for the given sizes; used both to reserve room (with the widest
// numbers) and to write the final header.
std::vector<TensorEntry> Tensors(DType dtype, std::uint64_t rows, std::uint64_t dim,
                                 std::uint64_t blocks, bool row_hashes, bool keys,
                                 std::uint64_t slots, std::uint64_t key_bytes, bool widest) {
  constexpr std::uint64_t W = ~std::uint64_t{0};
  std::vector<TensorEntry> t;
  std::uint64_t off = 0;
  auto add = [&](std::string_view name, std::string dt, std::vector<std::uint64_t> shape,
                 std::uint64_t bytes) {
    t.push_back({std::string(name), std::move(dt), std::move(shape), widest ? W : off,
                 widest ? W : off + bytes});
    off += bytes;
  };
  add(kTensorEmbedding, std::string(DTypeName(dtype)), {widest ? W : rows, dim},
      rows * dim * DTypeSize(dtype));
  add(kTensorChecksums, "U64", {widest ? W : blocks}, blocks * 8);
  if (row_hashes) add(kTensorRowHashes, "U64", {widest ? W : rows}, rows * 8);
  if (keys) {
    add(kTensorKeyOffsets, "U64", {widest ? W : rows + 1}, (rows + 1) * 8);
    add(kTensorKeyIndex, "U64", {widest ? W : slots}, slots * 8);
    add(kTensorKeyBytes, "U8", {widest ? W : key_bytes}, key_bytes);
    add(kTensorKeyChecksums, "U64", {3}, 3 * 8);
  }
  return t;
}

// Moves n bytes from `in` at in_off to `out` at out_off inside the kernel: shares the extents
// (FICLONERANGE) where the filesystem can, else copy_file_range, else pread/pwrite (a kernel
// without copy_file_range between these files). Returns whether the extents were shared. A clone
// covers whole filesystem blocks only: the offsets must be block-aligned and a short tail is copied.
Result<bool> KernelCopy(int in, std::uint64_t in_off, int out, std::uint64_t out_off,
                        std::uint64_t n, const std::string& what) {
  bool shared = false;
  struct stat st;
  const std::uint64_t blk = ::fstat(out, &st) == 0 && st.st_blksize > 0
                                ? static_cast<std::uint64_t>(st.st_blksize) : 4096;
  const std::uint64_t whole = n / blk * blk;
  if (whole > 0 && in_off % blk == 0 && out_off % blk == 0) {
    file_clone_range r{};
    r.src_fd = in;
    r.src_offset = in_off;
    r.src_length = whole;
    r.dest_offset = out_off;
    if (::ioctl(out, FICLONERANGE, &r) == 0) {
      shared = true;
      in_off += whole;
      out_off += whole;
      n -= whole;
    }
    // Any failure (no reflink on this filesystem, different filesystems, unaligned blocks) leaves
    // the destination as it was: the copy below does the whole range.
  }
  bool kernel = true;
  std::vector<char> buf;
  while (n > 0) {
    ssize_t got;
    if (kernel) {
      loff_t i = static_cast<loff_t>(in_off), o = static_cast<loff_t>(out_off);
      got = ::copy_file_range(in, &i, out, &o, std::min<std::uint64_t>(n, 1u << 30), 0);
      if (got < 0 && (errno == ENOSYS || errno == EXDEV || errno == EOPNOTSUPP ||
                      errno == EINVAL)) {
        kernel = false;
        continue;
      }
    } else {
      buf.resize(1u << 20);
      got = ::pread(in, buf.data(), std::min<std::uint64_t>(n, buf.size()),
                    static_cast<off_t>(in_off));
      if (got > 0) {
        std::size_t put = 0;
        while (put < static_cast<std::size_t>(got)) {
          ssize_t w = ::pwrite(out, buf.data() + put, static_cast<std::size_t>(got) - put,
                               static_cast<off_t>(out_off + put));
          if (w < 0 && errno == EINTR) continue;
          if (w < 0) return Status::FromErrno(what + ": write", errno);
          put += static_cast<std::size_t>(w);
        }
      }
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::FromErrno(what, errno);
    if (got == 0) {
      return Status::IOError(what + ": the source ended " + std::to_string(n) +
                             " bytes early (truncated underneath?)");
    }
    in_off += static_cast<std::uint64_t>(got);
    out_off += static_cast<std::uint64_t>(got);
    n -= static_cast<std::uint64_t>(got);
  }
  return shared;
}

}  // namespace

TableWriter::TableWriter(std::string path, WriterOptions options)
    : path_(std::move(path)), options_(std::move(options)) {}

TableWriter::~TableWriter() { Abort(); }

Result<std::unique_ptr<TableWriter>> TableWriter::Create(const std::string& path,
                                                         const WriterOptions& options) {
  if (options.dim == 0) {
    return Status::InvalidArgument("table '" + path + "': dim must be at least 1");
  }
  if (options.dim > (std::uint64_t{1} << 32)) {
    return Status::InvalidArgument("table '" + path + "': dim " + std::to_string(options.dim) +
                                   " is larger than 2^32");
  }
  for (const auto& [k, v] : options.metadata) {
    if (k.empty()) return Status::InvalidArgument("table '" + path + "': empty metadata key");
    if (k.rfind(kReservedMetaPrefix, 0) == 0) {
      return Status::InvalidArgument("table '" + path + "': metadata key '" + k +
                                     "' uses the reserved prefix 'embstore.'");
    }
  }
  std::unique_ptr<TableWriter> w(new TableWriter(path, options));
  EMBSTORE_RETURN_NOT_OK(w->Init());
  return w;
}

Result<std::unique_ptr<TableWriter>> TableWriter::Adopt(const std::string& path,
                                                        const WriterOptions& options,
                                                        std::unique_ptr<AtomicFile> spare,
                                                        std::uint64_t data_offset) {
  if (spare == nullptr) {
    return Status::InvalidArgument("table '" + path + "': no spare to adopt");
  }
  std::unique_ptr<TableWriter> w(new TableWriter(path, options));
  EMBSTORE_RETURN_NOT_OK(w->Init(std::move(spare), data_offset));
  return w;
}

Status TableWriter::Init(std::unique_ptr<AtomicFile> spare, std::uint64_t spare_data_offset) {
  row_bytes_ = options_.dim * DTypeSize(options_.dtype);
  block_rows_ = options_.block_rows ? options_.block_rows : DefaultBlockRows(row_bytes_);

  auto now = std::chrono::system_clock::now();
  metadata_ = {
      {std::string(kMetaFormat), std::string(kFormatName)},
      // The lowest version that holds this table (docs/FORMAT.md, "Compatibility").
      {std::string(kMetaVersion),
       std::to_string(options_.row_hashes  ? kFirstVersionWithRowHashes
                      : options_.with_keys ? kFirstVersionWithKeyChecksums
                                           : 1)},
      {std::string(kMetaChecksum), std::string(kChecksumName)},
      {std::string(kMetaBlockRows), std::to_string(block_rows_)},
      {std::string(kMetaCreated),
       Rfc3339Utc(
           std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count())},
      {std::string(kMetaCreator),
       options_.creator.empty() ? "embstore " + std::string(EmbstoreVersion()) : options_.creator},
  };
  if (options_.source) {
    metadata_.emplace_back(kMetaSourceName, options_.source->name);
    metadata_.emplace_back(kMetaSourceSize, std::to_string(options_.source->size));
    metadata_.emplace_back(kMetaSourceMtime, Rfc3339Utc(options_.source->mtime_unix));
  }
  if (options_.row_hashes) {
    // Its value is known at Finish; the placeholder has its width, for the header's reserve.
    metadata_.emplace_back(kMetaRowHashesChecksum, ContentIdHex(0));
  }
  if (options_.delta_of) {
    metadata_.emplace_back(kMetaDeltaOf, ContentIdHex(options_.delta_of->of));
    metadata_.emplace_back(kMetaDeltaBase, ContentIdHex(options_.delta_of->base));
  }
  for (const auto& kv : options_.metadata) metadata_.push_back(kv);

  // Reserve room for the largest header these options can produce: every number at its widest.
  HeaderContent widest{metadata_, Tensors(options_.dtype, 0, options_.dim, 0, options_.row_hashes,
                                          options_.with_keys, 0, 0, /*widest=*/true)};
  auto json = SerializeHeader(widest);
  if (!json.ok()) return json.status().WithContext("table '" + path_ + "'");
  std::uint64_t need = 8 + json->size();
  data_start_ = (need + kDataAlignment - 1) / kDataAlignment * kDataAlignment;

  if (spare != nullptr) {  // its matrix already lies in place: nothing to reserve or buffer
    if (spare_data_offset != data_start_) {
      return Status::FailedPrecondition(
          "table '" + path_ + "': the spare '" + spare->temp_path() + "' holds its matrix at byte " +
          std::to_string(spare_data_offset) + "; this version's header puts it at byte " +
          std::to_string(data_start_));
    }
    file_ = std::move(spare);
    adopted_ = true;
  } else {
    EMBSTORE_ASSIGN_OR_RETURN(file_, AtomicFile::Create(path_, options_.overwrite));
    if (!options_.keep_replaced.empty()) file_->KeepReplacedAs(options_.keep_replaced);
    if (const std::uint64_t rows = options_.expected_rows; rows > 0) {
      const std::uint64_t blocks = (rows + block_rows_ - 1) / block_rows_;
      EMBSTORE_RETURN_NOT_OK(file_->Preallocate(data_start_ + rows * row_bytes_ + blocks * 8 +
                                                (options_.row_hashes ? rows * 8 : 0)));
      checksums_.reserve(blocks);
      if (options_.row_hashes) row_hashes_.reserve(rows);
    }
    buffer_.reserve(kBufferBytes);
  }
  temp_path_ = file_->temp_path();
  hasher_ = std::make_unique<Hasher>();
  XXH3_64bits_reset(&hasher_->state);
  return Status::OK();
}

Status TableWriter::Fail(Status st) {
  Abort();
  return st;
}

void TableWriter::HashAppended(std::span<const std::byte> encoded) {
  if (options_.row_hashes) {
    // Whole rows only (AppendRows checks). A piece ends where its block ends (or after at most
    // 1 MiB of a larger block) and gets its row hashes, then its share of the block checksum,
    // which reads it from the cache rather than memory again: a 16 MiB append hashed rows, then
    // blocks, in two trips. Pieces that are whole blocks get their checksum in one call.
    const std::uint64_t block_bytes = block_rows_ * row_bytes_;
    const std::uint64_t most = DefaultBlockRows(row_bytes_) * row_bytes_;
    for (std::size_t at = 0; at < encoded.size();) {
      const std::size_t n = std::min<std::uint64_t>(
          {block_bytes - block_fill_, most, encoded.size() - at});
      for (std::size_t r = at; r + row_bytes_ <= at + n; r += row_bytes_) {
        row_hashes_.push_back(Checksum64(encoded.subspan(r, row_bytes_)));
      }
      HashBlocks(encoded.subspan(at, n));
      at += n;
    }
    return;
  }
  HashBlocks(encoded);
}

void TableWriter::HashBlocks(std::span<const std::byte> encoded) {
  const std::uint64_t block_bytes = block_rows_ * row_bytes_;
  while (!encoded.empty()) {
    if (block_fill_ == 0 && encoded.size() >= block_bytes) {
      // A whole block: the one-shot hash, whose code is the CPU's widest (the streaming one below
      // is xxhash's baseline build, SSE2 on x86-64: half the speed). Both give the same value.
      checksums_.push_back(Checksum64(encoded.first(block_bytes)));
      encoded = encoded.subspan(block_bytes);
      continue;
    }
    std::uint64_t take = std::min<std::uint64_t>(block_bytes - block_fill_, encoded.size());
    XXH3_64bits_update(&hasher_->state, encoded.data(), take);
    block_fill_ += take;
    encoded = encoded.subspan(take);
    if (block_fill_ == block_bytes) {
      checksums_.push_back(XXH3_64bits_digest(&hasher_->state));
      XXH3_64bits_reset(&hasher_->state);
      block_fill_ = 0;
    }
  }
}

TableWriter::Helper& TableWriter::Help() {
  if (!helper_) helper_ = std::make_unique<Helper>();
  return *helper_;
}

Status TableWriter::WriteMatrix(std::uint64_t offset, std::span<const std::byte> bytes) {
  EMBSTORE_RETURN_NOT_OK(file_->WriteAt(offset, bytes));
#ifdef SYNC_FILE_RANGE_WRITE
  if (options_.durable) {
    // Start these pages' writeback now, so the fsync at Finish() finds most of the table on disk
    // already instead of starting all of its writeback at the end. Best effort: where it fails
    // (or the filesystem ignores it) the fsync does it all.
    ::sync_file_range(file_->fd(), static_cast<off_t>(offset), static_cast<off_t>(bytes.size()),
                      SYNC_FILE_RANGE_WRITE);
  }
#endif
  return Status::OK();
}

Status TableWriter::FlushBuffer() {
  if (buffer_.empty()) return Status::OK();
  const std::uint64_t offset = data_start_ + flushed_;
  // The helper may still be writing the previous buffer: wait, then hand it this one.
  EMBSTORE_RETURN_NOT_OK(WaitHelper());
  writing_.swap(buffer_);
  buffer_.clear();
  buffer_.reserve(kBufferBytes);
  flushed_ += writing_.size();
  Status st = Help().Submit([this, offset] { return WriteMatrix(offset, AsBytes(writing_)); });
  if (!st.ok()) return Fail(st);
  return Status::OK();
}

Status TableWriter::WaitHelper() {
  if (!helper_) return Status::OK();
  Status st = helper_->Wait();
  if (!st.ok()) return Fail(st);
  return Status::OK();
}

Status TableWriter::AppendRows(std::span<const std::byte> encoded) {
  if (finished_ || !file_) {
    return Status::FailedPrecondition("table '" + path_ + "': writer is already finished");
  }
  if (matrix_given_ || adopted_) {
    return Fail(Status::FailedPrecondition(
        "table '" + path_ + "': rows appended to a given matrix (AppendMatrixFrom, or an adopted "
        "spare)"));
  }
  if (encoded.size() % row_bytes_ != 0) {
    return Fail(Status::InvalidArgument(
        "table '" + path_ + "': appended " + std::to_string(encoded.size()) +
        " bytes, not a whole number of " + std::to_string(row_bytes_) + "-byte rows"));
  }
  rows_ += encoded.size() / row_bytes_;
  if (buffer_.size() + encoded.size() > kBufferBytes) {
    EMBSTORE_RETURN_NOT_OK(FlushBuffer());
    if (encoded.size() >= kBufferBytes) {
      // A large append (the Python writers' 16 MiB chunks) is written straight from the
      // caller's memory, on this thread, while the helper hashes it (Helper says why this way
      // round); both are done before the call returns.
      EMBSTORE_RETURN_NOT_OK(WaitHelper());
      Status st = Help().Submit([this, encoded] {
        HashAppended(encoded);
        return Status::OK();
      });
      if (!st.ok()) return Fail(st);
      const std::uint64_t offset = data_start_ + flushed_;
      flushed_ += encoded.size();
      Status written = WriteMatrix(offset, encoded);
      EMBSTORE_RETURN_NOT_OK(WaitHelper());
      if (!written.ok()) return Fail(written);
      return Status::OK();
    }
  }
  HashAppended(encoded);
  buffer_.append(reinterpret_cast<const char*>(encoded.data()), encoded.size());
  return Status::OK();
}

// Checks and takes what AppendMatrixFrom and MatrixInPlace are given.
Status TableWriter::GivenMatrix(std::uint64_t rows, std::vector<std::uint64_t> checksums,
                                std::vector<std::uint64_t> row_hashes) {
  if (finished_ || !file_) {
    return Status::FailedPrecondition("table '" + path_ + "': writer is already finished");
  }
  if (rows_ != 0 || matrix_given_) {
    return Fail(Status::FailedPrecondition("table '" + path_ +
                                           "': a matrix given to a writer that has rows"));
  }
  const std::uint64_t blocks = (rows + block_rows_ - 1) / block_rows_;
  if (checksums.size() != blocks || (options_.row_hashes && row_hashes.size() != rows)) {
    return Fail(Status::InvalidArgument(
        "table '" + path_ + "': " + std::to_string(rows) + " rows given with " +
        std::to_string(checksums.size()) + " block checksums (" + std::to_string(blocks) +
        " blocks) and " + std::to_string(row_hashes.size()) + " row hashes"));
  }
  matrix_given_ = true;
  rows_ = rows;
  flushed_ = rows * row_bytes_;
  checksums_ = std::move(checksums);
  if (options_.row_hashes) row_hashes_ = std::move(row_hashes);
  return Status::OK();
}

Status TableWriter::AppendMatrixFrom(int fd, std::uint64_t offset, std::uint64_t rows,
                                     std::vector<std::uint64_t> checksums,
                                     std::vector<std::uint64_t> row_hashes) {
  if (adopted_) {
    return Fail(Status::FailedPrecondition("table '" + path_ +
                                           "': an adopted spare's matrix is patched in place"));
  }
  EMBSTORE_RETURN_NOT_OK(GivenMatrix(rows, std::move(checksums), std::move(row_hashes)));
  auto shared = KernelCopy(fd, offset, file_->fd(), data_start_, rows * row_bytes_,
                           "table '" + path_ + "': copy the matrix into '" + temp_path_ + "'");
  if (!shared.ok()) return Fail(shared.status());
  matrix_shared_ = *shared;
  if (matrix_shared_) {
    struct stat st;
    fs_block_ = ::fstat(file_->fd(), &st) == 0 && st.st_blksize > 0
                    ? static_cast<std::uint64_t>(st.st_blksize) : 4096;
    source_fd_ = fd;
    source_offset_ = offset;
  }
  return Status::OK();
}

Status TableWriter::MatrixInPlace(std::uint64_t rows, std::vector<std::uint64_t> checksums,
                                  std::vector<std::uint64_t> row_hashes) {
  if (!adopted_) {
    return Fail(Status::FailedPrecondition("table '" + path_ +
                                           "': MatrixInPlace needs an adopted spare"));
  }
  return GivenMatrix(rows, std::move(checksums), std::move(row_hashes));
}

Status TableWriter::PatchRows(std::uint64_t first_row, std::span<const std::byte> encoded) {
  if (finished_ || !file_) {
    return Status::FailedPrecondition("table '" + path_ + "': writer is already finished");
  }
  if (!matrix_given_ || encoded.size() % row_bytes_ != 0 || first_row > rows_ ||
      encoded.size() / row_bytes_ > rows_ - first_row) {
    return Fail(Status::InvalidArgument(
        "table '" + path_ + "': cannot patch " + std::to_string(encoded.size()) +
        " bytes at row " + std::to_string(first_row) + " of " + std::to_string(rows_) +
        (matrix_given_ ? " rows" : " rows (PatchRows needs AppendMatrixFrom first)")));
  }
  const std::uint64_t at = data_start_ + first_row * row_bytes_, end = at + encoded.size();
  const std::uint64_t matrix_end = data_start_ + rows_ * row_bytes_;
  const std::uint64_t lo = at / fs_block_ * fs_block_;
  if (!matrix_shared_ || encoded.empty() || lo < std::max(patched_end_, data_start_) ||
      (!patch_.empty() && lo < patch_at_)) {
    // A copied matrix (its blocks are this file's own), or rows behind what was written (out
    // of order): written as they are, the filesystem merging them into what is there.
    // Nothing later may widen over these bytes: a row can end past the last block written.
    if (!patch_.empty()) EMBSTORE_RETURN_NOT_OK(FlushPatch());
    Status st = file_->WriteAt(at, encoded);
    if (!st.ok()) return Fail(st);
    if (matrix_shared_) patched_end_ = std::max(patched_end_, end);
    return Status::OK();
  }
  const std::uint64_t hi = std::min(matrix_end, (end + fs_block_ - 1) / fs_block_ * fs_block_);
  if (!patch_.empty() && lo > patch_at_ + patch_.size()) EMBSTORE_RETURN_NOT_OK(FlushPatch());
  if (patch_.empty()) {
    patch_at_ = lo;
    patch_.resize(hi - lo);
    EMBSTORE_RETURN_NOT_OK(ReadSource(lo, patch_));
  } else if (hi > patch_at_ + patch_.size()) {
    const std::uint64_t have = patch_.size();
    patch_.resize(hi - patch_at_);
    EMBSTORE_RETURN_NOT_OK(ReadSource(patch_at_ + have, std::span(patch_).subspan(have)));
  }
  std::memcpy(patch_.data() + (at - patch_at_), encoded.data(), encoded.size());
  if (patch_.size() >= kBufferBytes) EMBSTORE_RETURN_NOT_OK(FlushPatch());
  return Status::OK();
}

Status TableWriter::ReadSource(std::uint64_t file_offset, std::span<std::byte> out) {
  Status st = ReadAllAt(
      source_fd_, source_offset_ + (file_offset - data_start_), out,
      "table '" + path_ + "': read the rows around a changed one from the old file");
  if (!st.ok()) return Fail(st);
  return Status::OK();
}

Status TableWriter::FlushPatch() {
  if (patch_.empty()) return Status::OK();
  Status st = file_->WriteAt(patch_at_, patch_);
  if (!st.ok()) return Fail(st);
  patched_end_ = patch_at_ + patch_.size();
  patch_.clear();
  return Status::OK();
}

Status TableWriter::AppendRowsF32(std::span<const float> values, OverflowPolicy overflow) {
  if (values.size() % options_.dim != 0) {
    return Fail(Status::InvalidArgument(
        "table '" + path_ + "': appended " + std::to_string(values.size()) +
        " values, not a whole number of rows of " + std::to_string(options_.dim)));
  }
  if (options_.dtype == DType::kF32) return AppendRows(std::as_bytes(values));
  std::vector<std::byte> enc(values.size() * DTypeSize(options_.dtype));
  auto bad = ConvertFromF32(options_.dtype, values, enc, overflow);
  if (bad) {
    return Fail(Status::OutOfRange("table '" + path_ + "': value " + std::to_string(values[*bad]) +
                                   " at row " + std::to_string(rows_ + *bad / options_.dim) +
                                   ", column " + std::to_string(*bad % options_.dim) +
                                   " is too large for " + std::string(DTypeName(options_.dtype))));
  }
  return AppendRows(enc);
}

Status TableWriter::OverwriteRows(std::uint64_t first_row, std::span<const std::byte> encoded) {
  if (finished_ || !file_) {
    return Status::FailedPrecondition("table '" + path_ + "': writer is already finished");
  }
  if (encoded.size() % row_bytes_ != 0 || first_row > rows_ ||
      encoded.size() / row_bytes_ > rows_ - first_row) {
    return Fail(Status::InvalidArgument("table '" + path_ + "': cannot overwrite " +
                                        std::to_string(encoded.size()) + " bytes at row " +
                                        std::to_string(first_row) + " of " + std::to_string(rows_) +
                                        " written rows"));
  }
  std::uint64_t nrows = encoded.size() / row_bytes_;
  if (nrows == 0) return Status::OK();
  std::uint64_t off = first_row * row_bytes_;
  std::uint64_t end = off + encoded.size();
  if (off < flushed_) {
    EMBSTORE_RETURN_NOT_OK(WaitHelper());  // the rows may be in the buffer being written
    std::uint64_t n = std::min(end, flushed_) - off;
    Status st = file_->WriteAt(data_start_ + off, encoded.first(n));
    if (!st.ok()) return Fail(st);
  }
  if (end > flushed_) {
    std::uint64_t from = std::max(off, flushed_);
    std::memcpy(buffer_.data() + (from - flushed_), encoded.data() + (from - off), end - from);
  }
  for (std::uint64_t b = first_row / block_rows_; b <= (first_row + nrows - 1) / block_rows_; ++b) {
    dirty_blocks_.push_back(b);
  }
  if (options_.row_hashes) {
    for (std::uint64_t i = 0; i < nrows; ++i) {
      row_hashes_[first_row + i] = Checksum64(encoded.subspan(i * row_bytes_, row_bytes_));
    }
  }
  return Status::OK();
}

std::optional<std::uint64_t> TableWriter::FindAppendedKey(std::string_view key,
                                                          std::uint64_t hash) const {
  if (live_index_.empty()) return std::nullopt;
  const std::uint64_t mask = live_index_.size() - 1;
  for (std::uint64_t s = hash & mask;; s = (s + 1) & mask) {
    const std::uint64_t row = live_index_[s];
    if (row == kEmptySlot) return std::nullopt;
    const std::uint64_t b = row == 0 ? 0 : key_ends_[row - 1];
    if (std::string_view(key_bytes_).substr(b, key_ends_[row] - b) == key) return row;
  }
}

void TableWriter::IndexAppendedKey(std::uint64_t row, std::uint64_t hash) {
  // At most half full, so probes stay short and an empty slot always ends a search.
  if (live_index_.size() < 2 * (key_ends_.size() + 1)) {
    live_index_.assign(std::max<std::size_t>(1024, 2 * live_index_.size()), kEmptySlot);
    const std::uint64_t mask = live_index_.size() - 1;
    for (std::uint64_t r = 0; r < key_ends_.size(); ++r) {
      if (r == row) continue;
      const std::uint64_t b = r == 0 ? 0 : key_ends_[r - 1];
      std::uint64_t s = XXH3_64bits(key_bytes_.data() + b, key_ends_[r] - b) & mask;
      while (live_index_[s] != kEmptySlot) s = (s + 1) & mask;
      live_index_[s] = r;
    }
  }
  const std::uint64_t mask = live_index_.size() - 1;
  std::uint64_t s = hash & mask;
  while (live_index_[s] != kEmptySlot) s = (s + 1) & mask;
  live_index_[s] = row;
}

Result<TableWriter::KeyedAppend> TableWriter::AppendKeyedRows(
    std::span<const std::byte> encoded, std::span<const std::string_view> keys) {
  if (finished_ || !file_) {
    return Status::FailedPrecondition("table '" + path_ + "': writer is already finished");
  }
  if (!options_.with_keys) {
    return Fail(Status::InvalidArgument("table '" + path_ +
                                        "': keyed rows appended to a writer created without keys"));
  }
  if (encoded.size() != keys.size() * row_bytes_) {
    return Fail(Status::InvalidArgument(
        "table '" + path_ + "': " + std::to_string(keys.size()) + " keys for " +
        std::to_string(encoded.size()) + " bytes of " + std::to_string(row_bytes_) +
        "-byte rows"));
  }
  KeyedAppend result;
  std::size_t run_begin = 0;  // the pending run of new rows, appended in one piece
  auto flush = [&](std::size_t upto) -> Status {
    if (upto > run_begin) {
      EMBSTORE_RETURN_NOT_OK(AppendRows(encoded.subspan(run_begin * row_bytes_,
                                                        (upto - run_begin) * row_bytes_)));
    }
    return Status::OK();
  };
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::string_view k = keys[i];
    if (k.empty() || k.size() > kMaxKeyBytes) {
      return Fail(Status::InvalidArgument("table '" + path_ + "': key for row " +
                                          std::to_string(key_ends_.size()) + " is " +
                                          std::to_string(k.size()) + " bytes; keys must be 1 to " +
                                          std::to_string(kMaxKeyBytes) + " bytes"));
    }
    const std::uint64_t hash = XXH3_64bits(k.data(), k.size());
    const std::optional<std::uint64_t> earlier = FindAppendedKey(k, hash);
    if (!earlier) {
      key_bytes_.append(k);
      key_ends_.push_back(key_bytes_.size());
      IndexAppendedKey(key_ends_.size() - 1, hash);
      continue;
    }
    // A repeated key: the pending run goes in first, so row numbers stay exact.
    EMBSTORE_RETURN_NOT_OK(flush(i));
    run_begin = i + 1;
    switch (options_.on_duplicate_key) {
      case DuplicateKeyPolicy::kError:
        result.refused = KeyedAppend::Refused{i, *earlier};
        return result;
      case DuplicateKeyPolicy::kFirst:
        break;
      case DuplicateKeyPolicy::kLast:
        EMBSTORE_RETURN_NOT_OK(OverwriteRows(*earlier, encoded.subspan(i * row_bytes_, row_bytes_)));
        break;
    }
    ++result.duplicates;
  }
  EMBSTORE_RETURN_NOT_OK(flush(keys.size()));
  return result;
}

Status TableWriter::AppendKeys(std::span<const std::string_view> keys) {
  if (finished_ || !file_) {
    return Status::FailedPrecondition("table '" + path_ + "': writer is already finished");
  }
  if (!options_.with_keys) {
    return Fail(Status::InvalidArgument("table '" + path_ +
                                        "': keys appended to a writer created without keys"));
  }
  for (std::string_view k : keys) {
    if (k.empty() || k.size() > kMaxKeyBytes) {
      return Fail(Status::InvalidArgument("table '" + path_ + "': key for row " +
                                          std::to_string(key_ends_.size()) + " is " +
                                          std::to_string(k.size()) + " bytes; keys must be 1 to " +
                                          std::to_string(kMaxKeyBytes) + " bytes"));
    }
    key_bytes_.append(k);
    key_ends_.push_back(key_bytes_.size());
  }
  return Status::OK();
}

Status TableWriter::WriteTail(std::uint64_t data_end, std::uint64_t* end) {
  std::uint64_t& pos = *end;
  pos = data_end;
  auto put = [&](std::span<const std::byte> bytes) -> Status {
    EMBSTORE_RETURN_NOT_OK(file_->WriteAt(pos, bytes));
    pos += bytes.size();
    return Status::OK();
  };
  EMBSTORE_RETURN_NOT_OK(put(AsBytes(checksums_)));
  if (options_.row_hashes) {
    row_hashes_.resize(rows_);  // (Finish has hashed rewritten rows again)
    EMBSTORE_RETURN_NOT_OK(put(AsBytes(row_hashes_)));
  }
  if (!options_.with_keys) return Status::OK();

  std::string offsets;
  offsets.reserve((rows_ + 1) * 8);
  PutU64(offsets, 0);
  for (std::uint64_t e : key_ends_) PutU64(offsets, e);
  EMBSTORE_RETURN_NOT_OK(put(AsBytes(offsets)));
  // keys.checksums (docs/FORMAT.md, "Keys"): one XXH3-64 per key tensor.
  std::vector<std::uint64_t> key_sums{Checksum64(AsBytes(offsets))};
  offsets = std::string();

  const std::uint64_t slots = KeySlotsFor(rows_);
  std::vector<std::uint64_t> index(slots, kEmptySlot);
  auto key = [&](std::uint64_t row) {
    std::uint64_t b = row == 0 ? 0 : key_ends_[row - 1];
    return std::string_view(key_bytes_).substr(b, key_ends_[row] - b);
  };
  for (std::uint64_t row = 0; row < rows_; ++row) {
    std::string_view k = key(row);
    std::uint64_t s = XXH3_64bits(k.data(), k.size()) & (slots - 1);
    while (index[s] != kEmptySlot) {
      if (key(index[s]) == k) {
        return Status::AlreadyExists("table '" + path_ + "': duplicate key '" + std::string(k) +
                                     "' at rows " + std::to_string(index[s]) + " and " +
                                     std::to_string(row));
      }
      s = (s + 1) & (slots - 1);
    }
    index[s] = row;
  }
  EMBSTORE_RETURN_NOT_OK(put(AsBytes(index)));
  EMBSTORE_RETURN_NOT_OK(put(AsBytes(key_bytes_)));
  key_sums.push_back(Checksum64(AsBytes(index)));
  key_sums.push_back(Checksum64(AsBytes(key_bytes_)));
  return put(AsBytes(key_sums));
}

Status TableWriter::Finish() {
  if (finished_ || !file_) {
    return Status::FailedPrecondition("table '" + path_ + "': writer is already finished");
  }
  if (options_.with_keys && key_ends_.size() != rows_) {
    return Fail(Status::InvalidArgument("table '" + path_ + "': " + std::to_string(rows_) +
                                        " rows but " + std::to_string(key_ends_.size()) + " keys"));
  }
  EMBSTORE_RETURN_NOT_OK(FlushBuffer());
  EMBSTORE_RETURN_NOT_OK(FlushPatch());
  EMBSTORE_RETURN_NOT_OK(WaitHelper());
  helper_.reset();
  if (block_fill_ > 0) {
    checksums_.push_back(XXH3_64bits_digest(&hasher_->state));
    block_fill_ = 0;
  }
  // Rows rewritten after they were hashed: hash their blocks again from the file.
  std::sort(dirty_blocks_.begin(), dirty_blocks_.end());
  dirty_blocks_.erase(std::unique(dirty_blocks_.begin(), dirty_blocks_.end()), dirty_blocks_.end());
  std::vector<std::byte> block;
  for (std::uint64_t b : dirty_blocks_) {
    std::uint64_t first = b * block_rows_;
    std::uint64_t n = std::min(block_rows_, rows_ - first) * row_bytes_;
    block.resize(n);
    Status read = ReadAllAt(file_->fd(), data_start_ + first * row_bytes_, block,
                            "table '" + path_ + "': cannot read back block " + std::to_string(b) +
                                " of '" + temp_path_ + "'");
    if (!read.ok()) return Fail(read);
    checksums_[b] = Checksum64(block);
  }

  const std::uint64_t data_end = data_start_ + rows_ * row_bytes_;
  std::uint64_t file_end = 0;
  Status st = WriteTail(data_end, &file_end);
  // An adopted spare may be longer than this version (its keys took more bytes).
  if (st.ok() && adopted_) st = file_->Truncate(file_end);
  if (!st.ok()) return Fail(st);
  if (options_.row_hashes) {
    for (auto& [k, v] : metadata_) {
      if (k == kMetaRowHashesChecksum) v = ContentIdHex(Checksum64(AsBytes(row_hashes_)));
    }
  }

  HeaderContent header{
      metadata_, Tensors(options_.dtype, rows_, options_.dim, checksums_.size(),
                         options_.row_hashes, options_.with_keys, KeySlotsFor(rows_),
                         key_bytes_.size(), false)};
  auto json = SerializeHeader(header);
  if (!json.ok()) return Fail(json.status());
  std::string head;
  PutU64(head, data_start_ - 8);
  head += *json;
  if (head.size() > data_start_) {
    return Fail(Status::Internal("table '" + path_ + "': header outgrew its reserved space"));
  }
  head.resize(data_start_, ' ');  // safetensors allows trailing spaces in the header
  st = file_->WriteAt(0, AsBytes(head));
  if (!st.ok()) return Fail(st);
  st = file_->Commit(options_.durable);
  if (!st.ok()) return Fail(st);
  finished_ = true;
  return Status::OK();
}

void TableWriter::Abort() {
  helper_.reset();  // waits for a job in flight; its error no longer matters
  if (file_) file_->Abort();
  file_.reset();
  buffer_.clear();
  patch_.clear();
}

}  // namespace embstore::store
