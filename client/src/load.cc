// Streaming a row range of a server's table (sources.h, internal::StreamRows and StreamRowsInto):
// parallel, verified and resumable, into the caller's buffer or a RowSink. The server source
// (server_source.cc) and, through it, the sharded source read servers' rows only through here.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <thread>

#include "embstore/client/client.h"
#include "embstore/client/row_source.h"
#include "embstore/store/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "fan_out.h"
#include "file_reader.h"
#include "sources.h"
#include "transport/row_stream.h"

namespace embstore::client {

using Clock = std::chrono::steady_clock;
using Bytes = std::span<const std::byte>;

namespace {

// Reads bytes of a payload held in pieces, front to back.
class PieceCursor {
 public:
  explicit PieceCursor(std::span<const Bytes> pieces) : pieces_(pieces) {}

  // Moves past the next `n` bytes, feeding them to `state` unless it is null.
  void Take(std::uint64_t n, XXH3_state_t* state) {
    while (n > 0) {
      const Bytes p = pieces_[index_].subspan(offset_);
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(n, p.size()));
      if (state != nullptr) XXH3_64bits_update(state, p.data(), take);
      n -= take;
      offset_ += take;
      if (offset_ == pieces_[index_].size()) {
        ++index_;
        offset_ = 0;
      }
    }
  }

 private:
  std::span<const Bytes> pieces_;
  std::size_t index_ = 0, offset_ = 0;
};

// store::Checksum64 of the pieces one after another.
std::uint64_t Checksum64(std::span<const Bytes> pieces, XXH3_state_t* state) {
  XXH3_64bits_reset(state);
  for (Bytes p : pieces) XXH3_64bits_update(state, p.data(), p.size());
  return XXH3_64bits_digest(state);
}

}  // namespace

// Verifies one request's rows as they arrive (PROTOCOL.md, "Verifying a chunk"): every block the
// request holds entirely against its stored checksum, hashed across chunks when it arrives in
// pieces; the cut blocks at the ends of an unaligned request by the chunk's payload checksum.
// Tracks the row up to which everything received is verified, where a retry resumes.
class StreamVerifier {
 public:
  StreamVerifier(const TableDesc& desc, std::uint64_t begin, std::uint64_t end);
  ~StreamVerifier();
  StreamVerifier(const StreamVerifier&) = delete;
  StreamVerifier& operator=(const StreamVerifier&) = delete;

  // Adds a chunk (header already checked) whose raw bytes are `payload`, held in one piece or
  // several (one after another); returns the row up to which the request's rows are now
  // verified, or Corruption.
  Result<std::uint64_t> Add(const wire::RowChunkFields& c, std::span<const Bytes> payload);

 private:
  const TableDesc& desc_;
  std::uint64_t begin_, end_;
  std::uint64_t verified_;
  XXH3_state_t* state_;    // a block's hash, across chunks
  XXH3_state_t* scratch_;  // a payload checksum over pieces
};

// One streamed read. Workers each own a contiguous, block-aligned part of the range and write only
// their part of the buffer, so they share nothing but counters and the first error.
class Loader {
 public:
  Loader(Client& client, const TableDesc& desc, std::uint64_t begin, std::uint64_t end,
         std::span<std::byte> out, const ReadOptions& o)
      : client_(client), desc_(desc), out_(out), total_(out.size()), o_(o), begin_(begin),
        end_(end) {}
  // Raw rows into `sink` instead of a buffer.
  Loader(Client& client, const TableDesc& desc, std::uint64_t begin, std::uint64_t end,
         RowSink& sink, std::uint64_t total, const ReadOptions& o)
      : client_(client), desc_(desc), sink_(&sink), total_(total), o_(o), begin_(begin),
        end_(end) {}

  Result<LoadStats> Run();

 private:
  struct Part {
    std::uint64_t begin, end;
  };

  Status Stream(int index, Part part);
  // Checks a chunk's header against the table: sizes, version, checksum block numbering.
  Status CheckChunk(const wire::RowChunkFields& c) const;
  // Copies (or converts) verified rows to their place in the caller's buffer.
  void Place(std::uint64_t first_row, std::span<const std::byte> payload);
  // Where a chunk's raw bytes land before verification: their final place in the caller's
  // buffer when no conversion follows, else `scratch`.
  std::span<std::byte> Landing(const wire::RowChunkFields& c, std::vector<std::byte>* scratch);
  bool SleepBackoff(int attempt);  // false when cancelled or past the deadline
  std::optional<Clock::time_point> deadline() const { return deadline_; }

  Client& client_;
  const TableDesc& desc_;
  std::span<std::byte> out_;
  RowSink* sink_ = nullptr;
  std::uint64_t total_;  // bytes of the output
  const ReadOptions& o_;
  std::uint64_t begin_, end_;
  std::optional<Clock::time_point> deadline_;
  // The streams; its cancel token stops all of them on the first error or the caller's cancel.
  internal::FanOut fan_;
  std::atomic<std::uint64_t> done_bytes_{0};
  std::atomic<std::uint64_t> wire_bytes_{0};
  std::atomic<int> resumes_{0};
  std::atomic<int> bad_chunks_{0};
};

int DefaultStreams() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min<unsigned>(cores, kMaxDefaultStreams));
}

void Loader::Place(std::uint64_t first_row, std::span<const std::byte> payload) {
  const std::uint64_t rows = payload.size() / desc_.row_bytes;
  if (o_.to_f32 && desc_.dtype != store::DType::kF32) {
    auto* dst = reinterpret_cast<float*>(out_.data() + (first_row - begin_) * desc_.dim * 4);
    store::ConvertToF32(desc_.dtype, payload, std::span<float>(dst, rows * desc_.dim));
  } else {
    std::memcpy(out_.data() + (first_row - begin_) * desc_.row_bytes, payload.data(),
                payload.size());
  }
}

Status Loader::CheckChunk(const wire::RowChunkFields& c) const {
  const std::uint64_t f = c.first_row;
  const std::uint64_t n = c.row_count;
  auto where = [&] {
    return "table '" + desc_.name + "' rows [" + std::to_string(f) + ", " + std::to_string(f + n) +
           ")";
  };
  if (c.payload_size != n * desc_.row_bytes) {
    return Status::Corruption(where() + ": chunk carries " + std::to_string(c.payload_size) +
                              " bytes, expected " + std::to_string(n * desc_.row_bytes));
  }
  if (c.content_id != desc_.content_id) {
    return Status::FailedPrecondition(where() + ": server switched table version mid-stream");
  }
  const std::uint64_t first_block = f / desc_.block_rows;
  const std::uint64_t last_block = (f + n - 1) / desc_.block_rows;
  if (c.first_block != first_block || c.block_checksums.size() != last_block - first_block + 1) {
    return Status::Corruption(where() + ": chunk names the wrong checksum blocks");
  }
  return Status::OK();
}

StreamVerifier::StreamVerifier(const TableDesc& desc, std::uint64_t begin, std::uint64_t end)
    : desc_(desc),
      begin_(begin),
      end_(end),
      verified_(begin),
      state_(XXH3_createState()),
      scratch_(XXH3_createState()) {}

StreamVerifier::~StreamVerifier() {
  XXH3_freeState(state_);
  XXH3_freeState(scratch_);
}

Result<std::uint64_t> StreamVerifier::Add(const wire::RowChunkFields& c,
                                          std::span<const Bytes> payload) {
  PieceCursor cursor(payload);
  const std::uint64_t br = desc_.block_rows;
  const std::uint64_t stop = c.first_row + c.row_count;
  std::optional<bool> payload_ok;  // computed once, if a cut block needs it
  for (std::uint64_t row = c.first_row; row < stop;) {
    const std::uint64_t b = row / br;
    const std::uint64_t bs = b * br;
    const std::uint64_t be = std::min(bs + br, desc_.rows);
    const std::uint64_t pe = std::min(stop, be);
    const std::uint64_t piece_bytes = (pe - row) * desc_.row_bytes;
    if (bs < begin_ || be > end_) {
      // A cut block: the request never holds all of it, so the chunk's payload checksum (of
      // the transfer) is all there is to check.
      if (!payload_ok) {
        payload_ok =
            c.payload_checksum && Checksum64(payload, scratch_) == *c.payload_checksum;
      }
      if (!*payload_ok) {
        return Status::Corruption("table '" + desc_.name + "' rows [" +
                                  std::to_string(c.first_row) + ", " + std::to_string(stop) +
                                  "): chunk does not match its payload checksum");
      }
      if (verified_ == row) verified_ = pe;
      cursor.Take(piece_bytes, nullptr);
    } else {
      if (row == bs) XXH3_64bits_reset(state_);
      cursor.Take(piece_bytes, state_);
      if (pe == be) {
        if (XXH3_64bits_digest(state_) != c.block_checksums[b - c.first_block]) {
          return Status::Corruption("table '" + desc_.name + "': block " + std::to_string(b) +
                                    " (rows [" + std::to_string(bs) + ", " + std::to_string(be) +
                                    ")) does not match its checksum");
        }
        if (verified_ == bs || verified_ < bs) verified_ = be;
      }
    }
    row = pe;
  }
  return verified_;
}

std::span<std::byte> Loader::Landing(const wire::RowChunkFields& c, std::vector<std::byte>* scratch) {
  if (o_.to_f32 && desc_.dtype != store::DType::kF32) {
    scratch->resize(c.payload_size);
    return *scratch;
  }
  return out_.subspan((c.first_row - begin_) * desc_.row_bytes, c.payload_size);
}

bool Loader::SleepBackoff(int attempt) {
  auto until = Clock::now() + internal::BackoffDelay(o_, attempt);
  if (deadline_ && until > *deadline_) until = *deadline_;
  return fan_.SleepUntil(until) && !(deadline_ && Clock::now() >= *deadline_);
}

Status Loader::Stream(int index, Part part) {
  std::vector<std::byte> scratch;
  std::vector<Bytes> pieces;  // a chunk's payload, for the sink
  const std::uint64_t out_row_bytes = o_.to_f32 ? desc_.dim * 4 : desc_.row_bytes;
  std::uint64_t verified = part.begin;  // rows before this are verified and in place
  int attempt = 0;                      // consecutive failures without progress
  Status last;                          // why the last attempt failed
  std::optional<std::uint64_t> last_bad_row;  // where the last corrupt chunk was fetched from
  bool first_attempt = true;
  while (verified < part.end) {
    if (fan_.cancel().cancelled()) return Status::Cancelled("load cancelled");
    if (!first_attempt) {
      ++resumes_;
      fan_.Post({LoadEvent::Kind::kResume, index, verified, last.message()});
    }
    // Resume where verification ended: a block that was arriving in pieces is fetched whole
    // again, so it can still be checked against its stored checksum. A retry takes a fresh
    // connection: gRPC's own reconnect backoff on the old one (a second or more) would otherwise
    // override ours.
    transport::RowRequest req{desc_.name, verified, part.end, o_.chunk_bytes, desc_.content_id};
    StreamVerifier verifier(desc_, verified, part.end);
    std::uint64_t next = verified;  // the row the next chunk must start at
    transport::StreamEnd end;
    Status chunk_error;
    Status sink_error;  // the output refused a write: final, not worth a retry
    {
      transport::RowStream call(client_, index, /*fresh=*/!first_attempt, deadline_, req,
                                &fan_.cancel());
      first_attempt = false;
      wire::DecodedRowChunk chunk;
      std::string decode_error;
      while (call.Read(&chunk, &decode_error)) {
        const wire::RowChunkFields& f = chunk.fields;
        wire_bytes_ += f.payload_size;
        if (o_.cancel && o_.cancel->cancelled()) {
          fan_.Fail(Status::Cancelled("load of table '" + desc_.name + "' cancelled"));
          break;
        }
        if (f.first_row != next || f.row_count == 0 || f.row_count > part.end - next) {
          chunk_error = Status::Corruption("table '" + desc_.name + "': server sent rows from " +
                                           std::to_string(f.first_row) + " (" +
                                           std::to_string(f.row_count) + " rows) where row " +
                                           std::to_string(next) + " was due");
          break;
        }
        chunk_error = CheckChunk(f);
        if (!chunk_error.ok()) break;
        Result<std::uint64_t> now_verified = verified;
        if (sink_ != nullptr) {
          // Verified where gRPC received it, then written to the sink from there. Rows of a
          // block that fails later are written again by the refetch, or the load fails.
          pieces.clear();
          for (const wire::Piece& p : chunk.payload) pieces.push_back(std::as_bytes(p));
          now_verified = verifier.Add(f, pieces);
          if (now_verified.ok()) {
            sink_error = sink_->WriteAt((f.first_row - begin_) * desc_.row_bytes, pieces);
            if (!sink_error.ok()) break;
          }
        } else {
          // One copy, from gRPC's receive buffers to where the rows belong, then verified
          // there. Rows that fail verification are overwritten by the refetch, or the load
          // fails.
          std::span<std::byte> landing = Landing(f, &scratch);
          chunk.CopyPayload(landing.data());
          const Bytes whole[] = {landing};
          now_verified = verifier.Add(f, whole);
          if (now_verified.ok() && landing.data() == scratch.data()) Place(next, landing);
        }
        if (!now_verified.ok()) {
          chunk_error = now_verified.status();
          break;
        }
        next += f.row_count;
        if (*now_verified > verified) {
          done_bytes_ += (*now_verified - verified) * out_row_bytes;
          verified = *now_verified;
          attempt = 0;
        }
        if (o_.after_chunk) o_.after_chunk(index, f.first_row);
      }
      if (!decode_error.empty() && chunk_error.ok()) {
        chunk_error = Status::Corruption("table '" + desc_.name + "' from '" +
                                         client_.options_.target + "': " + decode_error);
      }
      if (!chunk_error.ok() || !sink_error.ok()) call.Cancel();
      end = call.Finish();
    }
    if (!sink_error.ok()) return sink_error;
    if (verified >= part.end && chunk_error.ok()) return Status::OK();
    if (fan_.cancel().cancelled()) return Status::Cancelled("load cancelled");

    if (!chunk_error.ok()) {
      if (chunk_error.code() == StatusCode::kFailedPrecondition) return chunk_error;
      // A chunk that fails verification again after a fresh fetch of the same rows is not a
      // transient flip in transit: the server's file is corrupt there, and every further retry
      // would fetch the same bytes. Fail now instead of spending the whole retry budget.
      if (last_bad_row == verified && chunk_error.message() == last.message()) {
        return Status::Corruption(chunk_error.message() + " (twice, on fresh fetches: the " +
                                  "server's copy is corrupt; run 'embstore verify' on its file)");
      }
      last_bad_row = verified;
      ++bad_chunks_;
      fan_.Post({LoadEvent::Kind::kBadChunk, index, next, chunk_error.message()});
      last = chunk_error;
    } else if (end.kind == transport::StreamEnd::Kind::kOk) {
      last = Status::Internal("server '" + client_.options_.target + "' ended the stream at row " +
                              std::to_string(next) + " of [" + std::to_string(part.begin) + ", " +
                              std::to_string(part.end) + ")");
    } else if (end.kind == transport::StreamEnd::Kind::kFailedPrecondition) {
      return Status::FailedPrecondition("table '" + desc_.name + "' changed on server '" +
                                        client_.options_.target +
                                        "' during the load: " + end.message);
    } else if (end.kind == transport::StreamEnd::Kind::kDeadlineExceeded) {
      return Status::DeadlineExceeded("load of table '" + desc_.name + "' from '" +
                                      client_.options_.target + "' passed its deadline at row " +
                                      std::to_string(verified));
    } else if (end.kind == transport::StreamEnd::Kind::kServerCancelled) {
      // Not cancelled by us (checked above): the server cancelled the call, as a server that
      // shuts down or restarts does with the streams in flight. Resume like any lost connection.
      last = Status::Unavailable("server '" + client_.options_.target +
                                 "' cancelled the stream (shutting down?): " + end.message);
    } else if (end.kind == transport::StreamEnd::Kind::kFinal) {
      return end.status;
    } else {
      last = end.status;
    }
    if (++attempt >= o_.max_attempts) {
      return Status(last.code() == StatusCode::kCorruption ? StatusCode::kCorruption
                                                           : StatusCode::kUnavailable,
                    "load of table '" + desc_.name + "' gave up at row " +
                        std::to_string(verified) + " after " + std::to_string(attempt) +
                        " failed attempts: " + last.message());
    }
    if (!SleepBackoff(attempt)) {
      if (fan_.cancel().cancelled()) return Status::Cancelled("load cancelled");
      return Status::DeadlineExceeded("load of table '" + desc_.name +
                                      "' passed its deadline at row " + std::to_string(verified) +
                                      "; last error: " + last.message());
    }
  }
  return Status::OK();
}

Result<LoadStats> Loader::Run() {
  if (o_.timeout.count() > 0) deadline_ = Clock::now() + o_.timeout;
  auto start = Clock::now();
  // A first report before any work: the caller can cancel (or notice Ctrl-C) even a short load.
  if (o_.progress && !o_.progress(0, total_)) {
    return Status::Cancelled("load of table '" + desc_.name + "' cancelled");
  }

  // Block-aligned parts, as even as whole blocks allow.
  const std::uint64_t br = desc_.block_rows;
  const std::uint64_t first_block = begin_ / br;
  const std::uint64_t blocks = end_ > begin_ ? (end_ - 1) / br - first_block + 1 : 0;
  int streams = o_.streams > 0 ? o_.streams : DefaultStreams();
  streams = static_cast<int>(std::min<std::uint64_t>(streams, std::max<std::uint64_t>(blocks, 1)));
  std::vector<Part> parts;
  for (int i = 0; i < streams; ++i) {
    std::uint64_t b0 = first_block + blocks * i / streams;
    std::uint64_t b1 = first_block + blocks * (i + 1) / streams;
    Part p{std::max(begin_, b0 * br), std::min(end_, b1 * br)};
    if (i == streams - 1) p.end = end_;
    if (p.begin < p.end) parts.push_back(p);
  }

  // The calling thread reports progress and events, and watches the caller's cancel token.
  Status st = fan_.Run(
      static_cast<int>(parts.size()),
      [&](int i) { return Stream(i, parts[static_cast<std::size_t>(i)]); }, o_.on_event,
      [&]() -> Status {
        if ((o_.cancel && o_.cancel->cancelled()) ||
            (o_.progress && !o_.progress(done_bytes_.load(), total_))) {
          return Status::Cancelled("load of table '" + desc_.name + "' cancelled");
        }
        return Status::OK();
      });
  EMBSTORE_RETURN_NOT_OK(st);
  if (o_.progress) o_.progress(done_bytes_.load(), total_);

  LoadStats stats;
  stats.rows = end_ - begin_;
  stats.bytes = done_bytes_.load();
  stats.wire_bytes = wire_bytes_.load();
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stats.streams = static_cast<int>(parts.size());
  stats.resumes = resumes_.load();
  stats.bad_chunks = bad_chunks_.load();
  stats.content_id = desc_.content_id;
  return stats;
}

namespace internal {

Result<LoadStats> StreamRows(Client& client, const TableDesc& desc, std::uint64_t begin,
                             std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options) {
  EMBSTORE_ASSIGN_OR_RETURN(std::uint64_t need,
                            RowRangeBytes(desc, begin, end, options.to_f32));
  if (out.size() != need) {
    return Status::InvalidArgument("buffer for table '" + desc.name + "' holds " +
                                   std::to_string(out.size()) + " bytes, the read needs " +
                                   std::to_string(need));
  }
  Loader loader(client, desc, begin, end, out, options);
  return loader.Run();
}

Result<LoadStats> StreamRowsInto(Client& client, const TableDesc& desc, std::uint64_t begin,
                                 std::uint64_t end, RowSink& sink, const ReadOptions& options) {
  EMBSTORE_ASSIGN_OR_RETURN(std::uint64_t total, RowRangeBytes(desc, begin, end, false));
  ReadOptions o = options;
  o.to_f32 = false;
  Loader loader(client, desc, begin, end, sink, total, o);
  return loader.Run();
}

}  // namespace internal
}  // namespace embstore::client
