// Text input: chunks of whole lines parsed in parallel by the kernels, their rows consumed in
// input order, and the kernels' error positions turned into file:line:column messages.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "converter.h"
#include "kernel_common.h"
#include "messages.h"

namespace embstore::convert {
namespace {

// Maps a mapped chunk's pages in one call before parsing (MADV_POPULATE_READ, Linux 5.14+)
// instead of taking a page fault every few pages; harmless where unsupported.
void Prefault(const Chunk& c) {
#ifdef MADV_POPULATE_READ
  if (c.buffer) return;
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<std::uintptr_t>(c.text.begin) & ~(page - 1);
  auto end = reinterpret_cast<std::uintptr_t>(c.text.end);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)c;
#endif
}

// The input side of the pipeline on a thread of its own: cuts chunks ahead of the parsers
// (for a stream, the reading and inflating), maps a mapped chunk's pages (Prefault), and drops
// the pages of consumed chunks (Input::ReleaseMapped). On one core that work was about a
// quarter of the AVX2 kernel's parsing time for '%.18e' on tmpfs (perf: madvise and page
// faults); here it overlaps parsing. While it runs, only it touches the chunker and the input.
class ChunkAhead {
 public:
  ChunkAhead(Chunker* chunker, Input* in, std::size_t depth)
      : chunker_(chunker), in_(in), depth_(depth), thread_([this] { Run(); }) {}
  ~ChunkAhead() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // The next chunk in input order; false at the end; the chunker's error once the chunks before
  // it are taken.
  Result<bool> Next(Chunk* out) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !ready_.empty() || done_; });
    if (!ready_.empty()) {
      *out = std::move(ready_.front());
      ready_.pop_front();
      lock.unlock();
      cv_.notify_all();
      return true;
    }
    if (!error_.ok()) return error_;
    return false;
  }

  // The input below `upto` is consumed (Input::ReleaseMapped, done on this thread).
  void Release(std::uint64_t upto) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      release_upto_ = std::max(release_upto_, upto);
    }
    cv_.notify_all();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] {
        return stop_ || release_upto_ > released_ || (!done_ && ready_.size() < depth_);
      });
      if (stop_) return;
      if (release_upto_ > released_) {
        const std::uint64_t upto = release_upto_;
        lock.unlock();
        in_->ReleaseMapped(upto);
        lock.lock();
        released_ = upto;
        continue;
      }
      lock.unlock();
      Chunk c;
      Result<bool> got = chunker_->Next(&c);
      if (got.ok() && *got) Prefault(c);
      lock.lock();
      if (!got.ok()) {
        error_ = got.status();
        done_ = true;
      } else if (!*got) {
        done_ = true;
      } else {
        ready_.push_back(std::move(c));
      }
      cv_.notify_all();
    }
  }

  Chunker* const chunker_;
  Input* const in_;
  const std::size_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Chunk> ready_;
  bool done_ = false;  // the chunker is at its end, or failed (error_)
  Status error_;
  std::uint64_t release_upto_ = 0;
  std::uint64_t released_ = 0;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

Status Converter::ChunkError(const Chunk& chunk, const ChunkResult& r) {
  const convert::ChunkError& e = r.error;
  const char* base = chunk.text.begin;
  const std::uint64_t line = lines_before_ + e.line + 1;
  const std::uint64_t col = e.offset - e.line_begin + 1;
  const std::string where = Where(line, col);
  std::string_view tok(base + e.offset, e.length);
  std::string_view whole_line = LineAt(base + e.line_begin, chunk.text.end);
  const std::string dim_src = header_ ? "the header on line " + std::to_string(header_->line)
                                      : "the first row, line " + std::to_string(dim_line_);
  switch (e.kind) {
    case ErrorKind::kBadNumber:
      return Status::Corruption(where + ": " + Quote(tok) + " is not a number (line " +
                                Quote(whole_line) + ")" + ExoticSpaceNote(whole_line));
    case ErrorKind::kEmptyField:
      return Status::Corruption(where + ": empty field (expected a number between delimiters) " +
                                "in line " + Quote(whole_line));
    case ErrorKind::kTooFewValues:
    case ErrorKind::kTooManyValues:
      return Status::Corruption(where + ": row has " + std::to_string(e.found) +
                                " values, expected " + std::to_string(stats_.dim) + " (from " +
                                dim_src + "): " + Quote(whole_line) +
                                ExoticSpaceNote(whole_line));
    case ErrorKind::kOverflow:
      return Status::Corruption(where + ": " + Quote(tok) + " is out of range for " +
                                std::string(DTypeName(o_.dtype)) +
                                " (`on_overflow` inf stores it as infinity)");
    case ErrorKind::kBadKeyUtf8: {
      const char* key_begin = base + e.line_begin;
      while (key_begin < chunk.text.end && IsBlank(*key_begin)) ++key_begin;
      const char* key_end = key_begin;
      while (key_end < chunk.text.end && !IsBlank(*key_end) && *key_end != '\n' &&
             *key_end != '\r') {
        ++key_end;
      }
      return Status::Corruption(where + ": key is not valid UTF-8: " +
                                Quote(std::string_view(key_begin,
                                                       static_cast<std::size_t>(key_end -
                                                                                key_begin))));
    }
    case ErrorKind::kKeyTooLong:
      return Status::Corruption(where + ": key of " + std::to_string(e.length) +
                                " bytes is longer than " + std::to_string(kMaxKeyBytes) + ": " +
                                Quote(tok));
    case ErrorKind::kNone:
      break;
  }
  return Status::Internal("unknown parse error");
}
Status Converter::ConsumeResult(const Chunk& chunk, ChunkResult& r) {
  if (r.error.kind != ErrorKind::kNone) return ChunkError(chunk, r);
  if (params_.layout == Layout::kKeyed) {
    EMBSTORE_RETURN_NOT_OK(AppendKeyedRows(r));
  } else if (r.rows > 0) {
    EMBSTORE_RETURN_NOT_OK(writer_->AppendRows(r.values));
  }
  rows_parsed_ += r.rows;
  lines_before_ += r.lines;
  if (header_ && rows_parsed_ > header_->count) {
    return Status::Corruption(Where(header_->line, 1) + ": the header " + Quote(header_->text) +
                              " says " + std::to_string(header_->count) +
                              " rows, but there are more (line " +
                              std::to_string(lines_before_) + " is past them)");
  }
  stats_.input_bytes = chunk.end_offset;
  if (!ReportProgress()) return Status::Cancelled("conversion cancelled");
  return Status::OK();
}

Status Converter::RunTextPipeline() {
  const unsigned threads =
      o_.threads != 0 ? o_.threads : std::max(1u, std::thread::hardware_concurrency());
  stats_.threads = threads;
  const ParseKernel& kernel = ActiveParseKernel();
  if (!have_first_) return Status::OK();
  Prefault(first_);
  ChunkAhead ahead(chunker_.get(), in_.get(), 2 + threads);
  auto consumed = [&](const Chunk& c) {
    if (!c.buffer) ahead.Release(c.end_offset);
  };
  if (threads == 1) {
    ChunkResult r;
    Chunk c = first_;
    bool got = true;
    while (got) {
      r.Clear();
      kernel.parse(c.text, params_, &r);
      EMBSTORE_RETURN_NOT_OK(ConsumeResult(c, r));
      consumed(c);
      EMBSTORE_ASSIGN_OR_RETURN(got, ahead.Next(&c));
    }
    return Status::OK();
  }

  // Workers parse chunks in any order; this thread hands them out, consumes results in input
  // order and, while the next result is not ready, parses queued chunks itself. So `threads`
  // threads parse (threads - 1 workers and this one) and none is left idle or oversubscribed.
  // At most `max_inflight` chunks exist at once, which bounds memory.
  struct Slot {
    Chunk chunk;
    ChunkResult result;
    bool ready = false;
  };
  const std::size_t max_inflight = 2 * static_cast<std::size_t>(threads) + 2;
  std::vector<Slot> slots(max_inflight);
  std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::deque<std::size_t> queue;  // slot indexes to parse
  bool stop = false;

  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (unsigned t = 0; t + 1 < threads; ++t) {
    workers.emplace_back([&] {
      for (;;) {
        std::size_t idx;
        {
          std::unique_lock<std::mutex> lock(mu);
          work_cv.wait(lock, [&] { return stop || !queue.empty(); });
          if (stop) return;
          idx = queue.front();
          queue.pop_front();
        }
        Slot& s = slots[idx];
        s.result.Clear();
        kernel.parse(s.chunk.text, params_, &s.result);
        {
          std::lock_guard<std::mutex> lock(mu);
          s.ready = true;
        }
        done_cv.notify_all();
      }
    });
  }
  auto shutdown = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (auto& w : workers) w.join();
  };

  Status st;
  std::uint64_t next_read = 0;   // sequence number of the next chunk to read
  std::uint64_t next_write = 0;  // sequence number of the next chunk to consume
  bool eof = false;
  bool first_pending = true;
  while (st.ok()) {
    while (!eof && next_read - next_write < max_inflight) {
      Slot& s = slots[next_read % max_inflight];
      if (first_pending) {
        s.chunk = first_;
        first_pending = false;
      } else {
        auto got = ahead.Next(&s.chunk);
        if (!got.ok()) {
          st = got.status();
          break;
        }
        if (!*got) {
          eof = true;
          break;
        }
      }
      s.ready = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back(next_read % max_inflight);
      }
      work_cv.notify_one();
      ++next_read;
    }
    if (!st.ok() || next_write == next_read) break;
    Slot& s = slots[next_write % max_inflight];
    {
      std::unique_lock<std::mutex> lock(mu);
      while (!s.ready) {
        if (queue.empty()) {
          done_cv.wait(lock);
          continue;
        }
        std::size_t idx = queue.front();
        queue.pop_front();
        lock.unlock();
        Slot& mine = slots[idx];
        mine.result.Clear();
        kernel.parse(mine.chunk.text, params_, &mine.result);
        lock.lock();
        mine.ready = true;
      }
    }
    st = ConsumeResult(s.chunk, s.result);
    if (st.ok()) consumed(s.chunk);
    s.chunk = Chunk{};
    ++next_write;
  }
  shutdown();
  return st;
}
}  // namespace embstore::convert
