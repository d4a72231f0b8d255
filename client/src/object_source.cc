// RowSource over a table object in an object store, S3 or HDFS (row_source.h, OpenObjectSource).
//
// Opening fetches the header and everything after the matrix (checksums, keys) into a sparse file
// that only this source can see (created in a private directory under $TMPDIR and unlinked at
// once: nothing is left behind, whatever happens to the process), so the file is a valid table
// whose unfetched rows read as zeros. A read of rows then takes one of two ways:
// - the whole checksum blocks of a range none of whose blocks are in that copy yet, and that
//   needs no conversion, are read from the store (ranged reads of the version opened,
//   ObjectStore::ReadRange, several in parallel) straight into the caller's buffer and checked
//   there, block by block; they are not kept (a table loaded once costs one copy);
// - everything else (the blocks cut by a range's ends, key lookups, conversions) first fetches
//   the blocks it touches into the copy, where they stay, then reads them as a file source
//   does: every block verified against its checksum before its rows are copied.
// So a load of some rows or keys transfers their blocks and the table's metadata, never the
// whole object. Rows asked for by id (a delta sync) are taken from the table's delta object when
// it has them (objstore/delta.h): one GET for the rows that changed since the version before.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "embstore/client/row_source.h"
#include "embstore/common/scratch_dir.h"
#include "embstore/common/write_file.h"
#include "embstore/objstore/delta.h"
#include "embstore/objstore/object_store.h"
#include "embstore/objstore/transfer.h"
#include "embstore/store/checksum.h"
#include "embstore/store/format.h"
#include "embstore/store/names.h"
#include "embstore/store/table.h"
#include "file_reader.h"
#include "sources.h"

namespace embstore::client {
namespace {

constexpr std::uint64_t kFetchPart = 8ull << 20;  // bytes per ranged GET
constexpr int kFetchParallel = 8;
// Rows by id: the delta object is looked for from this many ids on, and fetched when it is at
// most kDeltaSpare times the bytes of the rows asked for (plus 1 MiB): beyond that, ranged reads
// of just those rows move fewer bytes.
constexpr std::size_t kDeltaMinIds = 16;
constexpr std::uint64_t kDeltaSpare = 4;

class ObjectSource final : public RowSource {
 public:
  ObjectSource(std::unique_ptr<objstore::ObjectStore> store, objstore::ObjectUrl url,
               std::string version, int fd, std::uint64_t data_offset,
               std::unique_ptr<internal::FileReader> reader, std::string copy_path,
               std::uint64_t opened_bytes)
      : transferred_(opened_bytes),
        opened_bytes_(opened_bytes),
        store_(std::move(store)),
        url_(std::move(url)),
        location_(url_.ToString()),
        version_(std::move(version)),
        fd_(fd),
        data_offset_(data_offset),
        reader_(std::move(reader)),
        copy_path_(std::move(copy_path)) {
    desc_ = store::DescribeTable(reader_->table(), store::TableNameOfFile(url_.key));
    present_.assign(reader_->table().num_blocks(), false);
  }
  ~ObjectSource() override { ::close(fd_); }

  std::string_view kind() const override { return "object"; }
  const std::string& location() const override { return location_; }
  const store::Table* local_table() const override { return &reader_->table(); }
  std::uint64_t transferred_bytes() const override { return transferred_.load(); }

  Result<LoadStats> CopyRows(std::uint64_t begin, std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options) override {
    EMBSTORE_ASSIGN_OR_RETURN(std::uint64_t need, OutputBytes(begin, end, options.to_f32));
    if (out.size() != need) {
      return Status::InvalidArgument("buffer for table '" + desc_.name + "' holds " +
                                     std::to_string(out.size()) + " bytes, rows [" +
                                     std::to_string(begin) + ", " + std::to_string(end) +
                                     ") need " + std::to_string(need));
    }
    if (begin < end) {
      if (auto direct = CopyRowsDirect(begin, end, out, options)) return Named(std::move(*direct));
    }
    return CopyRowsCached(begin, end, out, options);
  }

  Result<KeyCopyResult> CopyKeys(std::span<const std::string> keys, std::span<std::byte> out,
                                 const ReadOptions& options) override {
    const store::Table& t = reader_->table();
    if (t.has_keys()) {
      if (options.verify) EMBSTORE_RETURN_NOT_OK(t.VerifyKeys());
      // The blocks of the rows asked for, fetched in runs.
      std::vector<std::uint64_t> blocks;
      for (const auto& k : keys) {
        EMBSTORE_ASSIGN_OR_RETURN(auto row, t.FindKey(k));
        if (row) blocks.push_back(*row / t.block_rows());
      }
      std::sort(blocks.begin(), blocks.end());
      blocks.erase(std::unique(blocks.begin(), blocks.end()), blocks.end());
      for (std::size_t i = 0; i < blocks.size();) {
        std::size_t j = i + 1;
        while (j < blocks.size() && blocks[j] == blocks[j - 1] + 1) ++j;
        EMBSTORE_RETURN_NOT_OK(Fetch(blocks[i], blocks[j - 1] + 1).status());
        i = j;
      }
    }
    return Named(internal::CopyKeysFromTable(t, desc_.name, keys, out, options));
  }

  Result<std::vector<std::string>> Keys(std::uint64_t begin, std::uint64_t end) override {
    return Named(internal::KeysFromTable(reader_->table(), desc_.name, begin, end));
  }

  // The table's frame holds its block checksums, and its row hashes when it stores them (fetched
  // when the source was opened). With row hashes, the delta object of this version (when there
  // is one, at most kMaxDeltaFraction of the table) is fetched now, while the caller hashes its
  // copy: the rows that changed most likely come from it (CopyRowIds). A copy that turns out to
  // be up to date has paid for that GET.
  Result<RowDigest> Digest() override {
    const store::Table& t = reader_->table();
    RowDigest d;
    d.bytes = opened_bytes_;  // what opening fetched holds them
    d.block_checksums.resize(t.num_blocks());
    for (std::uint64_t b = 0; b < t.num_blocks(); ++b) d.block_checksums[b] = t.BlockChecksum(b);
    if (t.has_row_hashes()) {
      d.stored = true;
      // With the checksum written beside them, the row hashes are the writer's: the sync
      // compares rows by them without checking every block of its result (each row fetched is
      // checked against its hash on arrival, CopyRowIds).
      auto checked = t.CheckRowHashesChecksum();
      if (!checked.ok()) return Named(checked.status());
      d.verified = *checked;
      d.row_hashes.resize(t.rows());
      for (std::uint64_t r = 0; r < t.rows(); ++r) d.row_hashes[r] = t.StoredRowHash(r);
      Delta(static_cast<std::uint64_t>(objstore::kMaxDeltaFraction *
                                       static_cast<double>(t.rows() * t.row_bytes())));
      d.row_bytes = UncountedDeltaBytes();
    }
    return d;
  }

  // With stored row hashes, only the rows' own bytes are fetched (runs of nearby rows in one
  // ranged read, several reads in parallel), each row checked against its stored hash; without,
  // their whole blocks (RowSource::CopyRowIds).
  Result<LoadStats> CopyRowIds(std::span<const std::uint64_t> ids, std::span<std::byte> out,
                               const ReadOptions& options) override {
    const store::Table& t = reader_->table();
    if (!t.has_row_hashes()) return RowSource::CopyRowIds(ids, out, options);
    const std::uint64_t rb = t.row_bytes();
    if (out.size() != ids.size() * rb) {
      return Status::InvalidArgument("buffer for " + std::to_string(ids.size()) +
                                     " rows of table '" + desc_.name + "' holds " +
                                     std::to_string(out.size()) + " bytes");
    }
    std::atomic<std::uint64_t> wire{0};
    // First the rows the delta object holds, then the rest (`todo`, indices into ids) by range.
    std::vector<std::size_t> todo;
    std::uint64_t from_delta = 0, delta_wire = 0;
    if (ids.size() >= kDeltaMinIds) {
      EMBSTORE_ASSIGN_OR_RETURN(from_delta, TakeFromDelta(ids, out, &todo, &delta_wire));
    } else {
      todo.resize(ids.size());
      for (std::size_t x = 0; x < ids.size(); ++x) todo[x] = x;
    }
    // Runs: todo [i, j) read as rows [ids[todo[i]], ids[todo[j-1]] + 1), joining ids whose gap
    // costs fewer bytes than a request's overhead (about 4 KiB).
    const std::uint64_t join_gap = std::max<std::uint64_t>(1, 4096 / rb);
    struct Run {
      std::size_t i, j;
    };
    std::vector<Run> runs;
    for (std::size_t i = 0; i < todo.size();) {
      std::size_t j = i + 1;
      while (j < todo.size() && ids[todo[j]] - ids[todo[j - 1]] <= join_gap &&
             (ids[todo[j]] - ids[todo[i]] + 1) * rb <= kFetchPart) {
        ++j;
      }
      runs.push_back({i, j});
      i = j;
    }
    std::atomic<std::size_t> next{0};
    std::mutex err_mu;
    Status first_error;
    auto work = [&] {
      std::vector<std::byte> buf;
      for (std::size_t k; (k = next.fetch_add(1)) < runs.size();) {
        {
          std::lock_guard<std::mutex> el(err_mu);
          if (!first_error.ok()) return;
        }
        const Run r = runs[k];
        const std::uint64_t r0 = ids[todo[r.i]], r1 = ids[todo[r.j - 1]] + 1;
        buf.resize((r1 - r0) * rb);
        Status st;
        if (options.cancel != nullptr && options.cancel->cancelled()) {
          st = Status::Cancelled("read of table '" + desc_.name + "' cancelled");
        } else {
          st = store_->ReadRange(url_, version_, data_offset_ + r0 * rb, buf);
        }
        if (st.ok()) wire += buf.size();
        for (std::size_t y = r.i; st.ok() && y < r.j; ++y) {
          const std::size_t x = todo[y];
          const std::span<const std::byte> row(buf.data() + (ids[x] - r0) * rb, rb);
          if (store::Checksum64(row) != t.StoredRowHash(ids[x])) {
            st = Status::Corruption(location_ + ": row " + std::to_string(ids[x]) +
                                    " does not match its stored hash");
          } else {
            std::copy(row.begin(), row.end(), out.begin() + x * rb);
          }
        }
        if (!st.ok()) {
          std::lock_guard<std::mutex> el(err_mu);
          if (first_error.ok()) first_error = st;
        }
      }
    };
    // Small requests: more of them in flight than for large parts.
    const int n = static_cast<int>(std::min<std::size_t>(4 * kFetchParallel, runs.size()));
    std::vector<std::thread> threads;
    for (int i = 1; i < n; ++i) threads.emplace_back(work);
    if (!runs.empty()) work();
    for (auto& th : threads) th.join();
    transferred_ += wire.load();
    if (!first_error.ok()) return Replaced(first_error);
    LoadStats s;
    s.rows = ids.size();
    s.bytes = out.size();
    s.wire_bytes = wire.load() + delta_wire;
    s.delta_rows = from_delta;
    s.content_id = desc_.content_id;
    return s;
  }

 private:
  // Copies into `out` the rows of `ids` that the table's delta object holds, each checked against
  // this version's stored hash of the row it is taken for; the indices of the others go into
  // `todo`. The delta is looked for once per source (Digest may have fetched it already), and
  // fetched (whole, every block checked) only when it belongs to this version and is not much
  // larger than the rows asked for. Any trouble with it (none there, another version's,
  // unreadable) leaves every row to `todo`. Returns the rows taken; `wire` gets the delta's bytes
  // when this call is the first to report them.
  Result<std::uint64_t> TakeFromDelta(std::span<const std::uint64_t> ids, std::span<std::byte> out,
                                      std::vector<std::size_t>* todo, std::uint64_t* wire) {
    const store::Table& t = reader_->table();
    const std::uint64_t rb = t.row_bytes();
    const store::Table* delta = Delta(kDeltaSpare * ids.size() * rb);
    *wire = UncountedDeltaBytes();
    std::unordered_map<std::uint64_t, std::uint64_t> by_hash;  // stored hash -> delta row
    if (delta != nullptr) {
      by_hash.reserve(delta->rows());
      for (std::uint64_t r = 0; r < delta->rows(); ++r) by_hash.emplace(delta->StoredRowHash(r), r);
    }
    std::uint64_t taken = 0;
    for (std::size_t x = 0; x < ids.size(); ++x) {
      const std::uint64_t want = t.StoredRowHash(ids[x]);
      const auto hit = by_hash.find(want);
      if (hit != by_hash.end()) {
        EMBSTORE_ASSIGN_OR_RETURN(auto row, delta->RowBytes(hit->second, hit->second + 1));
        if (store::Checksum64(row) == want) {
          std::copy(row.begin(), row.end(), out.begin() + x * rb);
          ++taken;
          continue;
        }
      }
      todo->push_back(x);
    }
    if (delta != nullptr) EMBSTORE_RETURN_NOT_OK(delta->CheckIntact());
    return taken;
  }

  // The delta object of this version (objstore/delta.h), or null: looked for once, fetched when
  // it is at most `most` bytes (plus 1 MiB for its frame) and its header says it belongs to this
  // version (so a stale one costs its frame, not its rows).
  const store::Table* Delta(std::uint64_t most) {
    std::lock_guard<std::mutex> l(delta_mu_);
    if (delta_tried_) return delta_.get();
    delta_tried_ = true;
    const objstore::ObjectUrl at = objstore::DeltaUrl(url_);
    auto info = store_->Stat(at);
    if (!info.ok() || info->size > most + (1u << 20)) return nullptr;
    auto frame = objstore::FetchTableFrame(*store_, at, *info);
    if (!frame.ok()) return nullptr;
    transferred_ += frame->fetched;
    delta_bytes_ += frame->fetched;
    // Checked on the frame, and again on the file the rows were added to (the same version:
    // its rows are read from the version the frame came from).
    const auto ours = [&](const std::map<std::string, std::string>& meta) {
      const auto of = meta.find(std::string(store::kMetaDeltaOf));
      return of != meta.end() && of->second == store::ContentIdHex(desc_.content_id);
    };
    if (!ours(frame->metadata)) return nullptr;
    auto scratch = ScratchDir::Make("delta");
    if (!scratch.ok()) return nullptr;
    const std::string path = (*scratch)->File("delta.emb");
    objstore::TransferOptions o;
    o.verify = true;
    o.durable = false;  // a scratch file, gone with this source
    auto got = objstore::DownloadTable(*store_, at, *info, *frame, path, o);
    if (!got.ok()) return nullptr;
    transferred_ += got->bytes;
    delta_bytes_ += got->bytes;
    auto table = store::Table::Open(path);  // the mapping outlives the scratch directory
    if (!table.ok()) return nullptr;
    if (!ours((*table)->metadata()) || (*table)->dim() != desc_.dim ||
        (*table)->dtype() != desc_.dtype || !(*table)->has_row_hashes()) {
      return nullptr;
    }
    delta_ = std::move(table).value();
    return delta_.get();
  }

  // The delta's bytes not yet reported in a digest or a read (each fetch is reported once).
  std::uint64_t UncountedDeltaBytes() { return delta_bytes_.exchange(0); }

  // `st`, or for a FailedPrecondition from the store (the object was replaced since it was
  // opened) the message that says what to do.
  Status Replaced(const Status& st) const {
    if (st.code() != StatusCode::kFailedPrecondition) return st;
    return Status::FailedPrecondition(location_ + " was replaced since it was opened (version " +
                                      version_ + "); open it again to read the new version");
  }

  // Errors of the local copy name the object instead.
  Status Named(const Status& st) const {
    if (st.ok()) return st;
    std::string msg = st.message();
    for (std::size_t at; (at = msg.find(copy_path_)) != std::string::npos;) {
      msg.replace(at, copy_path_.size(), location_);
    }
    return Status(st.code(), msg);
  }
  template <typename T>
  Result<T> Named(Result<T> r) const {
    if (r.ok()) return r;
    return Named(r.status());
  }

  // Rows [begin, end) through the local copy: their missing blocks fetched into it, then read
  // from it as a file source reads, every block verified.
  Result<LoadStats> CopyRowsCached(std::uint64_t begin, std::uint64_t end, std::span<std::byte> out,
                                   const ReadOptions& options) {
    std::uint64_t fetched = 0;
    if (begin < end) {
      const std::uint64_t br = reader_->table().block_rows();
      EMBSTORE_ASSIGN_OR_RETURN(fetched, Fetch(begin / br, (end - 1) / br + 1));
    }
    auto stats = Named(reader_->CopyRows(begin, end, out, options, desc_.name));
    if (stats.ok()) stats->wire_bytes = fetched;
    return stats;
  }

  // Rows [begin, end) with the whole checksum blocks among them read from the store straight
  // into their place in `out` and checked there, when none of those blocks is in the local copy
  // yet and the rows need no conversion: a table loaded once (the common case) then costs one
  // copy, the network's, instead of a write into the local copy and a read back out of it. The
  // blocks cut by the range's ends go through the local copy (CopyRowsCached). nullopt when
  // this way does not apply.
  std::optional<Result<LoadStats>> CopyRowsDirect(std::uint64_t begin, std::uint64_t end,
                                                  std::span<std::byte> out,
                                                  const ReadOptions& options) {
    const store::Table& t = reader_->table();
    if (options.to_f32 && t.dtype() != store::DType::kF32) return std::nullopt;
    const std::uint64_t br = t.block_rows(), rb = t.row_bytes(), rows = t.rows();
    const std::uint64_t first_block = (begin + br - 1) / br;
    const std::uint64_t end_block = end == rows ? t.num_blocks() : end / br;
    if (first_block >= end_block) return std::nullopt;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (std::uint64_t b = first_block; b < end_block; ++b) {
        if (present_[b]) return std::nullopt;
      }
    }
    const auto start = std::chrono::steady_clock::now();
    const std::uint64_t mid_begin = first_block * br, mid_end = std::min(end_block * br, rows);
    const std::uint64_t total = out.size();
    LoadStats stats;
    // The ends, through the local copy, their progress counted within the whole.
    auto through_copy = [&](std::uint64_t r0, std::uint64_t r1, std::uint64_t done) -> Status {
      if (r0 >= r1) return Status::OK();
      ReadOptions o = options;
      if (options.progress) {
        o.progress = [&, done](std::uint64_t d, std::uint64_t) {
          return options.progress(done + d, total);
        };
      }
      EMBSTORE_ASSIGN_OR_RETURN(
          LoadStats s, CopyRowsCached(r0, r1, out.subspan((r0 - begin) * rb, (r1 - r0) * rb), o));
      stats.wire_bytes += s.wire_bytes;
      return Status::OK();
    };
    if (Status st = through_copy(begin, mid_begin, 0); !st.ok()) return st;
    // The whole blocks: parts of up to kFetchPart bytes, kFetchParallel at a time.
    const std::uint64_t per_part =
        std::max<std::uint64_t>(1, kFetchPart / std::max<std::uint64_t>(1, br * rb));
    const std::uint64_t parts = (end_block - first_block + per_part - 1) / per_part;
    std::atomic<std::uint64_t> next{0}, done{(mid_begin - begin) * rb};
    std::mutex err_mu;
    Status first_error;
    auto failed = [&] {
      std::lock_guard<std::mutex> el(err_mu);
      return !first_error.ok();
    };
    auto work = [&](bool reports) {
      for (std::uint64_t i; !failed() && (i = next.fetch_add(1)) < parts;) {
        const std::uint64_t b0 = first_block + i * per_part;
        const std::uint64_t b1 = std::min(end_block, b0 + per_part);
        const std::uint64_t r0 = b0 * br, r1 = std::min(b1 * br, rows);
        const std::span<std::byte> dst = out.subspan((r0 - begin) * rb, (r1 - r0) * rb);
        Status st;
        if (options.cancel != nullptr && options.cancel->cancelled()) {
          st = Status::Cancelled("load of table '" + desc_.name + "' from " + location_ +
                                 " cancelled");
        } else if (options.timeout.count() > 0 &&
                   std::chrono::steady_clock::now() - start > options.timeout) {
          st = Status::DeadlineExceeded("load of table '" + desc_.name + "' from " + location_ +
                                        " took longer than its timeout");
        } else {
          st = store_->ReadRange(url_, version_, data_offset_ + r0 * rb, dst);
        }
        if (st.ok()) transferred_ += dst.size();
        for (std::uint64_t b = b0; st.ok() && options.verify && b < b1; ++b) {
          const std::uint64_t first = b * br, last = std::min(first + br, rows);
          st = t.CheckBlock(b, dst.subspan((first - r0) * rb, (last - first) * rb));
        }
        if (st.ok()) {
          done += dst.size();
          if (reports && options.progress && !options.progress(done.load(), total)) {
            st = Status::Cancelled("load of table '" + desc_.name + "' from " + location_ +
                                   " cancelled");
          }
        }
        if (!st.ok()) {
          std::lock_guard<std::mutex> el(err_mu);
          if (first_error.ok()) first_error = st;
        }
      }
    };
    const int n = static_cast<int>(std::min<std::uint64_t>(kFetchParallel, parts));
    std::vector<std::thread> threads;
    for (int i = 1; i < n; ++i) threads.emplace_back(work, false);
    work(true);
    for (auto& th : threads) th.join();
    if (!first_error.ok()) return Replaced(first_error);
    stats.wire_bytes += (mid_end - mid_begin) * rb;
    if (Status st = through_copy(mid_end, end, (mid_end - begin) * rb); !st.ok()) return st;
    if (options.progress && !options.progress(total, total)) {
      return Status::Cancelled("load of table '" + desc_.name + "' from " + location_ +
                               " cancelled");
    }
    stats.rows = end - begin;
    stats.bytes = out.size();
    stats.streams = n;
    stats.content_id = desc_.content_id;
    stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return stats;
  }

  // Makes blocks [b0, b1) present in the local copy: the missing ones are fetched, in ranged GETs
  // of up to kFetchPart bytes, kFetchParallel at a time. One fetch at a time per source. Returns
  // the bytes fetched.
  Result<std::uint64_t> Fetch(std::uint64_t b0, std::uint64_t b1) {
    std::lock_guard<std::mutex> l(mu_);
    const store::Table& t = reader_->table();
    const std::uint64_t br = t.block_rows();
    const std::uint64_t rb = t.row_bytes();
    struct Piece {
      std::uint64_t off, len;
    };
    std::vector<Piece> pieces;
    for (std::uint64_t b = b0; b < b1;) {
      if (present_[b]) {
        ++b;
        continue;
      }
      std::uint64_t e = b;
      while (e < b1 && !present_[e]) ++e;
      // Blocks [b, e) are missing: their bytes, cut into parts.
      const std::uint64_t first = data_offset_ + b * br * rb;
      const std::uint64_t last = data_offset_ + std::min(e * br, t.rows()) * rb;
      for (std::uint64_t off = first; off < last; off += kFetchPart) {
        pieces.push_back({off, std::min(kFetchPart, last - off)});
      }
      b = e;
    }
    if (pieces.empty()) return 0;
    std::atomic<std::size_t> next{0};
    std::mutex err_mu;
    Status first_error;
    auto work = [&] {
      std::vector<std::byte> buf;
      for (std::size_t i; (i = next.fetch_add(1)) < pieces.size();) {
        {
          std::lock_guard<std::mutex> el(err_mu);
          if (!first_error.ok()) return;
        }
        buf.resize(pieces[i].len);
        Status st = store_->ReadRange(url_, version_, pieces[i].off, buf);
        if (st.ok()) {
          transferred_ += buf.size();
          st = WriteAllAt(fd_, pieces[i].off, buf, "the local copy of " + location_);
        }
        if (!st.ok()) {
          std::lock_guard<std::mutex> el(err_mu);
          if (first_error.ok()) first_error = st;
        }
      }
    };
    const int n = static_cast<int>(std::min<std::size_t>(kFetchParallel, pieces.size()));
    std::vector<std::thread> threads;
    for (int i = 1; i < n; ++i) threads.emplace_back(work);
    work();
    for (auto& th : threads) th.join();
    if (!first_error.ok()) return Replaced(first_error);
    for (std::uint64_t b = b0; b < b1; ++b) present_[b] = true;
    std::uint64_t bytes = 0;
    for (const Piece& p : pieces) bytes += p.len;
    return bytes;
  }

  std::atomic<std::uint64_t> transferred_;
  std::uint64_t opened_bytes_;  // the frame: header, checksums, row hashes, keys
  std::unique_ptr<objstore::ObjectStore> store_;
  objstore::ObjectUrl url_;
  std::string location_;
  std::string version_;
  int fd_;
  std::uint64_t data_offset_;
  std::unique_ptr<internal::FileReader> reader_;
  std::string copy_path_;  // the unlinked local copy's name, as the reader's messages give it
  std::mutex mu_;
  std::vector<bool> present_;  // per checksum block, guarded by mu_
  std::mutex delta_mu_;
  bool delta_tried_ = false;                    // guarded by delta_mu_
  std::shared_ptr<const store::Table> delta_;  // guarded by delta_mu_
  std::atomic<std::uint64_t> delta_bytes_{0};
};

}  // namespace

Result<std::unique_ptr<RowSource>> OpenObjectSource(const std::string& address) {
  EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl url,
                            objstore::ParseObjectKeyUrl(address, "a table object"));
  EMBSTORE_ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(url));
  EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectInfo info, store->Stat(url));
  const std::string what = url.ToString();
  EMBSTORE_ASSIGN_OR_RETURN(objstore::TableFrame frame,
                            objstore::FetchTableFrame(*store, url, info));

  // The private sparse copy.
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/embstore-object-XXXXXX";
  std::vector<char> dir(tmpl.begin(), tmpl.end());
  dir.push_back('\0');
  if (::mkdtemp(dir.data()) == nullptr) {
    return Status::FromErrno("create a temporary directory like '" + tmpl + "'", errno);
  }
  const std::string path = std::string(dir.data()) + "/table.emb";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int err = errno;
    ::rmdir(dir.data());
    return Status::FromErrno("create '" + path + "'", err);
  }
  auto cleanup = [&] {
    ::unlink(path.c_str());
    ::rmdir(dir.data());
  };
  Status st = objstore::WriteTableFrame(fd, frame, info.size, "the local copy of " + what);
  Result<std::unique_ptr<internal::FileReader>> reader =
      st.ok() ? internal::FileReader::Open(path)
              : Result<std::unique_ptr<internal::FileReader>>(st);
  cleanup();  // the open descriptors and the mapping keep the file alive, nothing else does
  if (!reader.ok()) {
    ::close(fd);
    Status e = reader.status();
    std::string msg = e.message();
    for (std::size_t at; (at = msg.find(path)) != std::string::npos;)
      msg.replace(at, path.size(), what);
    return Status(e.code(), msg);
  }
  return std::unique_ptr<RowSource>(
      new ObjectSource(std::move(store), std::move(url), info.version, fd, frame.data_offset,
                       std::move(reader).value(), path, frame.fetched));
}

}  // namespace embstore::client
