#include "file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "embstore/store/checksum.h"
#include "embstore/store/dtype.h"

namespace embstore::client::internal {
namespace {

using Clock = std::chrono::steady_clock;

// Rows are read in pieces of whole checksum blocks, about this many bytes each: large enough
// that a pread costs little more than its copy, small enough that a piece's blocks are still in
// the CPU's cache when they are hashed right after, and that threads share the work evenly.
constexpr std::uint64_t kPieceBytes = 4u << 20;

std::string Rows(std::uint64_t b, std::uint64_t e) {
  return "rows [" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

}  // namespace

Result<std::unique_ptr<FileReader>> FileReader::Open(const std::string& path) {
  std::unique_ptr<FileReader> r(new FileReader());
  // The descriptor and the validated mapping must be the same file: a rename between the two
  // opens (a table being replaced) is retried once, then reported.
  for (int attempt = 0;; ++attempt) {
    if (r->fd_ >= 0) ::close(r->fd_);
    r->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (r->fd_ < 0) return Status::FromErrno("open table '" + path + "'", errno);
    struct stat by_fd;
    if (::fstat(r->fd_, &by_fd) != 0) return Status::FromErrno("fstat '" + path + "'", errno);
    EMBSTORE_ASSIGN_OR_RETURN(r->table_, store::Table::Open(path));
    struct stat by_path;
    if (::stat(path.c_str(), &by_path) == 0 && by_path.st_ino == by_fd.st_ino &&
        by_path.st_dev == by_fd.st_dev) {
      r->file_ = ServerFile{path, IdentityOf(by_fd)};
      break;
    }
    if (attempt == 1) {
      return Status::Unavailable("table file '" + path + "' was replaced while being opened");
    }
  }
  // The matrix is read in order, often once: let the kernel read ahead generously.
  ::posix_fadvise(r->fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  return r;
}

Result<std::unique_ptr<FileReader>> FileReader::OpenServersFile(const TableDesc& desc) {
  if (!desc.file) {
    return Status::NotFound("server did not say where table '" + desc.name + "' lives");
  }
  const ServerFile& f = *desc.file;
  struct stat st;
  if (::stat(f.path.c_str(), &st) != 0) {
    return Status::NotFound("table file '" + f.path + "' is not reachable from this host");
  }
  if (IdentityOf(st) != f.identity) {
    return Status::NotFound("'" + f.path +
                            "' on this host is not the server's file (another host "
                            "or a newer version)");
  }
  EMBSTORE_ASSIGN_OR_RETURN(auto reader, Open(f.path));
  if (reader->file().identity != f.identity ||
      store::ContentId(reader->table()) != desc.content_id) {
    return Status::NotFound("'" + f.path + "' changed since the server described it");
  }
  return reader;
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

Status FileReader::ReadExactly(std::byte* dst, std::uint64_t n, std::uint64_t off) const {
  while (n > 0) {
    const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(off));
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("read '" + path() + "' at byte " + std::to_string(off), errno);
    }
    if (got == 0) {
      return Status::Corruption("'" + path() + "': the file ends at byte " + std::to_string(off) +
                                ", inside the matrix (it was truncated or rewritten in place "
                                "while being read; table files must be replaced by rename)");
    }
    dst += got;
    n -= static_cast<std::uint64_t>(got);
    off += static_cast<std::uint64_t>(got);
  }
  return Status::OK();
}

Status FileReader::ReadPiece(std::uint64_t begin, std::uint64_t r0, std::uint64_t r1,
                             std::span<std::byte> out, const ReadOptions& o,
                             std::vector<std::byte>* scratch) const {
  const store::Table& t = *table_;
  const std::uint64_t rb = t.row_bytes();
  const std::uint64_t br = t.block_rows();
  const bool convert = o.to_f32 && t.dtype() != store::DType::kF32;
  const std::uint64_t out_rb = o.to_f32 ? t.dim() * 4 : rb;
  auto file_offset = [&](std::uint64_t row) { return t.data_offset() + row * rb; };
  // Rows [a, b) land at their place in `out`, read straight there unless they need converting.
  auto land = [&](std::uint64_t a, std::uint64_t b, std::span<const std::byte> bytes) {
    if (convert) {
      store::ConvertToF32(t.dtype(), bytes,
                          std::span<float>(reinterpret_cast<float*>(out.data() +
                                                                    (a - begin) * out_rb),
                                           (b - a) * t.dim()));
    } else if (bytes.data() != out.data() + (a - begin) * rb) {
      std::memcpy(out.data() + (a - begin) * rb, bytes.data(), bytes.size());
    }
  };
  auto check = [&](std::uint64_t block, std::span<const std::byte> bytes) -> Status {
    if (store::Checksum64(bytes) == t.BlockChecksum(block)) return Status::OK();
    const std::uint64_t first = block * br;
    return Status::Corruption("'" + path() + "': checksum mismatch in block " +
                              std::to_string(block) + " (" +
                              Rows(first, first + bytes.size() / rb) + ")");
  };

  // Blocks cut by the range's ends are read whole into `scratch`, checked, and the rows asked
  // for copied out; whole blocks are read in one pread straight into place and checked there.
  std::uint64_t row = r0;
  while (row < r1) {
    const std::uint64_t block = row / br;
    const std::uint64_t bs = block * br;
    const std::uint64_t be = t.rows() - bs <= br ? t.rows() : bs + br;
    if (o.verify && (row != bs || r1 < be)) {
      scratch->resize((be - bs) * rb);
      EMBSTORE_RETURN_NOT_OK(ReadExactly(scratch->data(), scratch->size(), file_offset(bs)));
      EMBSTORE_RETURN_NOT_OK(check(block, *scratch));
      const std::uint64_t stop = std::min(r1, be);
      land(row, stop, std::span<const std::byte>(*scratch).subspan((row - bs) * rb,
                                                                   (stop - row) * rb));
      row = stop;
      continue;
    }
    // A run of whole blocks (or, unverified, of any rows) up to the piece's end or the next cut.
    std::uint64_t stop = r1;
    if (o.verify && stop != t.rows() && stop % br != 0) stop = stop / br * br;  // leave the cut
    const std::uint64_t n = (stop - row) * rb;
    std::byte* dst;
    if (convert) {
      scratch->resize(n);
      dst = scratch->data();
    } else {
      dst = out.data() + (row - begin) * rb;
    }
    EMBSTORE_RETURN_NOT_OK(ReadExactly(dst, n, file_offset(row)));
    if (o.verify) {
      for (std::uint64_t b = row / br; b * br < stop; ++b) {
        const std::uint64_t first = b * br;
        const std::uint64_t last = std::min(stop, first + br);
        EMBSTORE_RETURN_NOT_OK(
            check(b, std::span<const std::byte>(dst + (first - row) * rb, (last - first) * rb)));
      }
    }
    land(row, stop, std::span<const std::byte>(dst, n));
    row = stop;
  }
  return Status::OK();
}

Result<LoadStats> FileReader::CopyRows(std::uint64_t begin, std::uint64_t end,
                                       std::span<std::byte> out, const ReadOptions& o,
                                       const std::string& name) const {
  const store::Table& t = *table_;
  EMBSTORE_RETURN_NOT_OK(t.RowBytes(begin, end).status());
  const std::uint64_t out_rb = o.to_f32 ? t.dim() * 4 : t.row_bytes();
  if (out.size() != (end - begin) * out_rb) {
    return Status::InvalidArgument("buffer for table '" + name + "' holds " +
                                   std::to_string(out.size()) + " bytes, " + Rows(begin, end) +
                                   " need " + std::to_string((end - begin) * out_rb));
  }
  const auto start = Clock::now();
  const std::optional<Clock::time_point> deadline =
      o.timeout.count() > 0 ? std::optional(start + o.timeout) : std::nullopt;
  if (o.progress && !o.progress(0, out.size())) {
    return Status::Cancelled("load of table '" + name + "' from '" + path() + "' cancelled");
  }

  // Pieces of whole blocks (the first and last may be cut by the range).
  const std::uint64_t br = t.block_rows();
  const std::uint64_t piece_rows =
      std::max<std::uint64_t>(1, kPieceBytes / std::max<std::uint64_t>(1, br * t.row_bytes())) *
      br;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;
  for (std::uint64_t r = begin; r < end;) {
    const std::uint64_t next = std::min(end, (r / piece_rows + 1) * piece_rows);
    pieces.emplace_back(r, next);
    r = next;
  }
  int threads = o.streams > 0 ? o.streams : DefaultStreams();
  threads = static_cast<int>(std::min<std::size_t>(threads, std::max<std::size_t>(1, pieces.size())));

  std::atomic<std::size_t> next_piece{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  Status first_error;
  int running = threads;
  auto fail = [&](Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.ok()) first_error = std::move(st);
    stop.store(true);
  };
  auto worker = [&] {
    std::vector<std::byte> scratch;
    for (;;) {
      const std::size_t i = next_piece.fetch_add(1);
      if (i >= pieces.size() || stop.load()) break;
      if (deadline && Clock::now() > *deadline) {
        fail(Status::DeadlineExceeded("load of table '" + name + "' from '" + path() +
                                      "' passed its deadline at row " +
                                      std::to_string(pieces[i].first)));
        break;
      }
      auto [r0, r1] = pieces[i];
      Status st = ReadPiece(begin, r0, r1, out, o, &scratch);
      if (!st.ok()) {
        fail(std::move(st));
        break;
      }
      done.fetch_add((r1 - r0) * out_rb);
      if (o.after_chunk) o.after_chunk(0, r0);
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };
  // Workers read and verify; the calling thread reports progress and watches for cancellation
  // and the deadline, and otherwise sleeps.
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return running == 0; });
      if (running == 0) break;
      lock.unlock();
      if ((o.cancel && o.cancel->cancelled()) ||
          (o.progress && !o.progress(done.load(), out.size()))) {
        fail(Status::Cancelled("load of table '" + name + "' from '" + path() + "' cancelled"));
      } else if (deadline && Clock::now() > *deadline) {
        fail(Status::DeadlineExceeded("load of table '" + name + "' from '" + path() +
                                      "' passed its deadline"));
      }
      lock.lock();
    }
  }
  for (auto& th : pool) th.join();
  if (!first_error.ok()) return first_error;
  if (o.cancel && o.cancel->cancelled()) {
    return Status::Cancelled("load of table '" + name + "' from '" + path() + "' cancelled");
  }
  if (o.progress) o.progress(done.load(), out.size());
  LoadStats stats;
  stats.rows = end - begin;
  stats.bytes = done.load();
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stats.local = true;
  stats.streams = threads;
  stats.content_id = store::ContentId(t);
  return stats;
}

}  // namespace embstore::client::internal
