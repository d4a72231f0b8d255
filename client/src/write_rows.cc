// RowSource::WriteRows for sources without a streaming path of their own (row_source.h): windows
// of rows read with CopyRows into one of two buffers while the other is written to the sink, so
// reading and writing overlap and memory stays at two windows.
#include <algorithm>
#include <chrono>
#include <future>
#include <optional>
#include <vector>

#include "embstore/client/row_source.h"

namespace embstore::client {
namespace {

using Clock = std::chrono::steady_clock;

// Rows per window: about 64 MiB, whole checksum blocks, so each window is verified on its own.
std::uint64_t WindowRows(const TableDesc& d, std::uint64_t out_row_bytes) {
  const std::uint64_t br = std::max<std::uint64_t>(1, d.block_rows);
  const std::uint64_t blocks = std::max<std::uint64_t>(1, (64u << 20) / (br * out_row_bytes));
  return blocks * br;
}

}  // namespace

Result<LoadStats> RowSource::WriteRows(std::uint64_t begin, std::uint64_t end, RowSink& sink,
                                       const ReadOptions& options) {
  EMBSTORE_ASSIGN_OR_RETURN(const std::uint64_t total, OutputBytes(begin, end, options.to_f32));
  const std::uint64_t out_row = options.to_f32 ? desc_.dim * 4 : desc_.row_bytes;
  const std::uint64_t window = WindowRows(desc_, out_row);
  const auto start = Clock::now();
  const std::optional<Clock::time_point> deadline =
      options.timeout.count() > 0 ? std::optional(start + options.timeout) : std::nullopt;

  std::vector<std::byte> bufs[2];
  LoadStats sum;
  std::future<Status> writing;
  for (std::uint64_t r = begin, k = 0; r < end || writing.valid(); ++k) {
    Status read_status;
    const std::uint64_t e = std::min(end, r + window);
    if (r < end) {
      std::vector<std::byte>& buf = bufs[k % 2];
      buf.resize((e - r) * out_row);
      ReadOptions w = options;
      if (deadline) {
        w.timeout =
            std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
        if (w.timeout.count() <= 0) {
          read_status = Status::DeadlineExceeded("read of table '" + desc_.name +
                                                 "' passed its deadline at row " +
                                                 std::to_string(r));
        }
      }
      const std::uint64_t base = (r - begin) * out_row;
      if (options.progress) {
        w.progress = [&options, base, total](std::uint64_t done, std::uint64_t) {
          return options.progress(base + done, total);
        };
      }
      if (read_status.ok()) {
        auto stats = CopyRows(r, e, buf, w);
        read_status = stats.status();
        if (stats.ok()) {
          sum.bytes += stats->bytes;
          sum.wire_bytes += stats->wire_bytes;
          sum.resumes += stats->resumes;
          sum.bad_chunks += stats->bad_chunks;
          sum.streams = std::max(sum.streams, stats->streams);
          sum.local = stats->local;
        }
      }
    }
    // The previous window has been written meanwhile (or failed).
    const Status write_status = writing.valid() ? writing.get() : Status::OK();
    EMBSTORE_RETURN_NOT_OK(write_status);
    EMBSTORE_RETURN_NOT_OK(read_status);
    if (r < end) {
      const std::span<const std::byte> rows = bufs[k % 2];
      const std::uint64_t offset = (r - begin) * out_row;
      writing = std::async(std::launch::async, [&sink, rows, offset] {
        const std::span<const std::byte> pieces[] = {rows};
        return sink.WriteAt(offset, pieces);
      });
    }
    r = e;
  }
  sum.rows = end - begin;
  sum.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  sum.content_id = desc_.content_id;
  return sum;
}

Result<RowDigest> RowSource::Digest() {
  return Status::Unimplemented("a " + std::string(kind()) + " source (" + location() +
                               ") has no row hashes to compare");
}

Result<RowDigest> RowSource::DigestAgainst(
    const std::function<std::span<const std::uint64_t>(std::uint64_t)>&) {
  return Digest();
}

Result<LoadStats> RowSource::CopyRowIds(std::span<const std::uint64_t> ids,
                                        std::span<std::byte> out, const ReadOptions& options) {
  const std::uint64_t rb = desc_.row_bytes;
  if (out.size() != ids.size() * rb) {
    return Status::InvalidArgument("buffer for " + std::to_string(ids.size()) + " rows of table '" +
                                   desc_.name + "' holds " + std::to_string(out.size()) + " bytes");
  }
  ReadOptions o = options;
  o.to_f32 = false;
  o.progress = nullptr;
  LoadStats total;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i + 1;
    while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
    EMBSTORE_ASSIGN_OR_RETURN(LoadStats s, CopyRows(ids[i], ids[j - 1] + 1,
                                                    out.subspan(i * rb, (j - i) * rb), o));
    total.wire_bytes += s.wire_bytes;
    i = j;
  }
  total.rows = ids.size();
  total.bytes = out.size();
  total.content_id = desc_.content_id;
  return total;
}

Result<LoadStats> RowSource::HoldRowIds(std::span<const std::uint64_t> ids, HeldRows* held,
                                        const ReadOptions& options) {
  const std::size_t rb = desc_.row_bytes;
  // Not zeroed: CopyRowIds writes every byte.
  std::unique_ptr<std::byte[]> piece(new std::byte[ids.size() * rb]);
  EMBSTORE_ASSIGN_OR_RETURN(LoadStats s,
                            CopyRowIds(ids, std::span(piece.get(), ids.size() * rb), options));
  held->rows.resize(ids.size());
  for (std::size_t k = 0; k < ids.size(); ++k) held->rows[k] = piece.get() + k * rb;
  held->pieces.clear();
  held->pieces.emplace_back(std::move(piece));
  return s;
}

}  // namespace embstore::client
