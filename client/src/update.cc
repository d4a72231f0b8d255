// Delta syncs (update.h): compare the source's digest with the copy, fetch the rows that differ,
// check every block of the result, then apply (in memory) or write a new file (UpdateFile).
#include "embstore/client/update.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "embstore/store/checksum.h"
#include "embstore/store/dtype.h"
#include "embstore/store/table.h"
#include "embstore/store/writer.h"

namespace embstore::client {
// XXH3-64 of each `rb`-byte row of `rows`, while the source is opened and its digest arrives.
// The rows go out in chunks, in row order, from a shared counter: every core but one hashes from
// the start (the transfer needs a core: on 2 cores, hashing on both while the digest came made a
// sync from a local server slower), and the caller hashes too whenever it waits for rows
// (WaitUpTo, Join) instead of sleeping (in memory from a local server: 0.053-0.058 s against
// 0.058-0.065 s with the rows split between the other cores up front). Chunks finish in about row
// order, so a source can compare the first rows' hashes, and ask for what differs there, while
// the rest are hashed (ServerSource::DigestAgainst).
class CopyHashes::Hasher {
 public:
  // The hashes' vector is sized by the first helper, so that the caller goes on at once (zeroing
  // 7.5 MB of new memory took 5 ms here).
  Hasher(std::span<const std::byte> rows, std::size_t rb)
      : rows_(rows), rb_(rb), n_(rows.size() / rb),
        chunks_((n_ + kChunkRows - 1) / kChunkRows), done_(chunks_, 0) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const std::uint64_t helpers = std::max<std::uint64_t>(
        1, std::min<std::uint64_t>(std::max(1u, cores - 1), chunks_));
    for (std::uint64_t t = 0; t < helpers; ++t) {
      pool_.emplace_back([this, t] {
        if (t == 0) {
          hashes_.resize(n_);
          sized_.count_down();
        }
        Work(chunks_);
      });
    }
  }
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;
  // Unused hashes are abandoned: the helpers stop after the chunk they are on.
  ~Hasher() {
    next_.store(chunks_);
    for (auto& th : pool_) th.join();
  }

  bool Covers(std::span<const std::byte> rows, std::size_t rb) const {
    return rows.data() == rows_.data() && rows.size() == rows_.size() && rb == rb_;
  }

  // Rows [0, upto) hashed (hashing on the calling thread meanwhile); all of them, sized n.
  std::span<const std::uint64_t> WaitUpTo(std::uint64_t upto) {
    const std::uint64_t need = (std::min(upto, n_) + kChunkRows - 1) / kChunkRows;
    Work(need);
    std::unique_lock lock(mu_);
    finished_.wait(lock, [&] { return ordered_ >= need; });
    return hashes_;
  }

  // Every row's hash, hashing on the calling thread until no chunk is left.
  std::vector<std::uint64_t> Take() {
    WaitUpTo(n_);
    for (auto& th : pool_) th.join();
    pool_.clear();
    return std::move(hashes_);
  }

 private:
  static constexpr std::uint64_t kChunkRows = 8192;

  // Takes chunks until none is left or (for a caller waiting for rows) the chunks below `need`
  // are all taken.
  void Work(std::uint64_t need) {
    sized_.wait();
    while (true) {
      if (next_.load(std::memory_order_relaxed) >= need) return;
      const std::uint64_t c = next_++;
      if (c >= chunks_) return;
      const std::uint64_t hi = std::min<std::uint64_t>(n_, (c + 1) * kChunkRows);
      for (std::uint64_t r = c * kChunkRows; r < hi; ++r) {
        hashes_[r] = store::Checksum64(rows_.subspan(r * rb_, rb_));
      }
      std::lock_guard lock(mu_);
      done_[c] = 1;
      while (ordered_ < chunks_ && done_[ordered_]) ++ordered_;
      finished_.notify_all();
    }
  }

  std::span<const std::byte> rows_;
  std::size_t rb_;
  std::uint64_t n_;
  std::uint64_t chunks_;
  std::vector<std::uint64_t> hashes_;
  std::latch sized_{1};
  std::atomic<std::uint64_t> next_{0};
  std::mutex mu_;
  std::condition_variable finished_;
  std::vector<std::uint8_t> done_;  // guarded by mu_
  std::uint64_t ordered_ = 0;       // chunks [0, ordered_) are hashed; guarded by mu_
  std::vector<std::thread> pool_;
};

CopyHashes::CopyHashes(std::unique_ptr<Hasher> hasher) : hasher_(std::move(hasher)) {}
CopyHashes::~CopyHashes() = default;

std::unique_ptr<CopyHashes> CopyHashes::Start(std::span<const std::byte> rows,
                                              std::size_t row_bytes) {
  if (row_bytes == 0) return nullptr;
  return std::unique_ptr<CopyHashes>(new CopyHashes(std::make_unique<Hasher>(rows, row_bytes)));
}

bool CopyHashes::Covers(std::span<const std::byte> rows, std::size_t row_bytes) const {
  return hasher_->Covers(rows, row_bytes);
}

namespace {


using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Runs fn(lo, hi) over [0, n) split across the cores.
template <typename Fn>
void Parallel(std::uint64_t n, std::uint64_t min_per_thread, Fn fn) {
  if (n == 0) return;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const unsigned threads = static_cast<unsigned>(
      std::max<std::uint64_t>(1, std::min<std::uint64_t>(cores, n / min_per_thread)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    pool.emplace_back(fn, n * t / threads, n * (t + 1) / threads);
  }
  fn(std::uint64_t{0}, n / threads);
  for (auto& th : pool) th.join();
}

// The rows to fetch: those whose hash differs from the source's, or (without row hashes) every
// row of the blocks whose checksum differs.
std::vector<std::uint64_t> RowsToFetch(const RowDigest& d, std::span<const std::uint64_t> local,
                                       std::span<const std::uint64_t> local_blocks,
                                       std::uint64_t rows, std::uint64_t block_rows) {
  std::vector<std::uint64_t> ids;
  if (d.group_rows > 0) {  // only the groups that differ, the rest as the copy has them
    store::AppendDifferingRows(d.groups, d.group_rows, rows, d.row_hashes, local, &ids);
    return ids;
  }
  if (!d.row_hashes.empty()) {
    for (std::uint64_t r = 0; r < rows; ++r) {
      if (local[r] != d.row_hashes[r]) ids.push_back(r);
    }
    return ids;
  }
  for (std::uint64_t b = 0; b < d.block_checksums.size(); ++b) {
    if (local_blocks[b] == d.block_checksums[b]) continue;
    for (std::uint64_t r = b * block_rows; r < std::min(rows, (b + 1) * block_rows); ++r) {
      ids.push_back(r);
    }
  }
  return ids;
}

// The result of a sync before it is applied: `base` (the copy's rows) with the rows `ids` taken
// from `fetched` (row ids[k] at fetched[k]).
class Patched {
 public:
  Patched(std::span<const std::byte> base, std::size_t rb, std::span<const std::uint64_t> ids,
          std::span<const std::byte* const> fetched)
      : base_(base), rb_(rb), ids_(ids), fetched_(fetched) {}

  // XXH3-64 of rows [first, last) (a block) as the result holds them.
  std::uint64_t BlockChecksum(std::uint64_t first, std::uint64_t last) const {
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    std::size_t k = std::lower_bound(ids_.begin(), ids_.end(), first) - ids_.begin();
    std::uint64_t r = first;
    while (r < last) {
      if (k < ids_.size() && ids_[k] == r) {
        XXH3_64bits_update(&state, fetched_[k], rb_);
        ++k;
        ++r;
        continue;
      }
      const std::uint64_t stop = k < ids_.size() ? std::min(last, ids_[k]) : last;
      XXH3_64bits_update(&state, base_.data() + r * rb_, (stop - r) * rb_);
      r = stop;
    }
    return XXH3_64bits_digest(&state);
  }

 private:
  std::span<const std::byte> base_;
  std::size_t rb_;
  std::span<const std::uint64_t> ids_;
  std::span<const std::byte* const> fetched_;
};

// Whether a digest's groups ascend inside a table of `rows` rows and its row hashes are theirs.
bool GroupsFit(const RowDigest& d, std::uint64_t rows) {
  std::uint64_t total = 0;
  for (std::size_t k = 0; k < d.groups.size(); ++k) {
    const store::RowGroup group = store::RowGroupOf(d.groups[k], d.group_rows, rows);
    if (group.first >= rows || (k > 0 && d.groups[k] <= d.groups[k - 1])) return false;
    total += group.size();
  }
  return total == d.row_hashes.size();
}

// The digest, or needs_full when the source has none. Fills the stats' digest fields. `local`
// returns the copy's row hashes (RowSource::DigestAgainst).
Result<std::optional<RowDigest>> DigestOf(
    RowSource& src, const std::function<std::span<const std::uint64_t>(std::uint64_t)>& local,
    UpdateStats* stats) {
  auto d = src.DigestAgainst(local);
  if (!d.ok()) {
    if (d.status().code() != StatusCode::kUnimplemented) return d.status();
    stats->needs_full = true;
    stats->full_reason = d.status().message();
    return std::optional<RowDigest>();
  }
  if (d->block_checksums.size() != src.desc().num_blocks ||
      (d->group_rows == 0 && !d->row_hashes.empty() &&
       d->row_hashes.size() != src.desc().rows) ||
      (d->group_rows > 0 && !GroupsFit(*d, src.desc().rows))) {
    return Status::Internal("the digest of table '" + src.desc().name + "' from " +
                            src.location() + " does not match its description");
  }
  stats->digest_bytes = d->bytes;
  stats->row_bytes_moved += d->row_bytes;
  stats->by_rows = d->group_rows > 0 || !d->row_hashes.empty();
  return std::optional<RowDigest>(std::move(d).value());
}

// Fetches the rows `ids` (ascending) of the source, checked, where the source holds them.
Result<HeldRows> Fetch(RowSource& src, std::span<const std::uint64_t> ids,
                       const ReadOptions& options, UpdateStats* stats) {
  HeldRows fetched;
  if (!ids.empty()) {
    ReadOptions o = options;
    o.to_f32 = false;
    EMBSTORE_ASSIGN_OR_RETURN(LoadStats s, src.HoldRowIds(ids, &fetched, o));
    stats->row_bytes_moved += s.wire_bytes;
    stats->delta_rows += s.delta_rows;
  }
  stats->changed_rows = ids.size();
  return fetched;
}

// Rows [first, last) of the source, whole, checked: a block that differed after the patch.
Status FetchBlock(RowSource& src, std::uint64_t first, std::uint64_t last, std::span<std::byte> out,
                  const ReadOptions& options, UpdateStats* stats) {
  ReadOptions o = options;
  o.to_f32 = false;
  o.verify = true;
  o.progress = nullptr;
  EMBSTORE_ASSIGN_OR_RETURN(LoadStats s, src.CopyRows(first, last, out, o));
  stats->row_bytes_moved += s.wire_bytes > 0 ? s.wire_bytes : out.size();
  ++stats->refetched_blocks;
  return Status::OK();
}

// The stats of a sync to the version `d` describes, before anything is compared.
UpdateStats StatsFor(const TableDesc& d) {
  UpdateStats stats;
  stats.rows = d.rows;
  stats.table_bytes = d.rows * d.row_bytes;
  stats.content_id = d.content_id;
  return stats;
}

// What a sync brings to a copy `base` of an earlier version, found and checked before anything is
// applied: the rows whose hashes differ, fetched, and the blocks that still differed after them,
// fetched whole. `local` holds the copy's row hashes, computed from its bytes (a stored hash is
// never trusted: the result's hashes are derived from these).
struct Delta {
  RowDigest digest;
  std::vector<std::uint64_t> local;
  std::vector<std::uint64_t> ids;
  HeldRows fetched;  // row ids[k] at fetched.rows[k]
  std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> whole;  // (block, its rows)
};

// nullopt when the source has no digest (stats->needs_full says why).
Result<std::optional<Delta>> PlanDelta(RowSource& src, std::span<const std::byte> base,
                                       const ReadOptions& options, UpdateStats* stats,
                                       std::unique_ptr<CopyHashes::Hasher> hasher = nullptr) {
  const TableDesc& d = src.desc();
  const std::size_t rb = d.row_bytes;
  const std::uint64_t br = d.block_rows;
  const auto start = Clock::now();
  Delta delta;
  // The copy's row hashes while the source's digest is on its way (most sources have row hashes;
  // without them the blocks are compared instead); a source that compares group hashes first
  // waits for them.
  if (hasher == nullptr || !hasher->Covers(base, rb)) {
    hasher = std::make_unique<CopyHashes::Hasher>(base, rb);
  }
  auto digest_or = DigestOf(
      src, [&](std::uint64_t upto) { return hasher->WaitUpTo(upto); }, stats);
  delta.local = hasher->Take();
  stats->digest_seconds = Since(start);
  EMBSTORE_ASSIGN_OR_RETURN(auto digest, std::move(digest_or));
  if (!digest) return std::optional<Delta>();
  delta.digest = std::move(*digest);
  std::vector<std::uint64_t> local_blocks;
  if (!stats->by_rows) {
    local_blocks.resize(d.num_blocks);
    for (std::uint64_t b = 0; b < d.num_blocks; ++b) {
      const std::uint64_t first = b * br, last = std::min(d.rows, first + br);
      local_blocks[b] = store::Checksum64(base.subspan(first * rb, (last - first) * rb));
    }
  }
  delta.ids = RowsToFetch(delta.digest, delta.local, local_blocks, d.rows, br);
  auto phase = Clock::now();
  EMBSTORE_ASSIGN_OR_RETURN(delta.fetched, Fetch(src, delta.ids, options, stats));
  stats->fetch_seconds = Since(phase);
  phase = Clock::now();
  // Every block of the result, checked (on every core) before anything is applied, unless the
  // source vouches for its hashes (a server checked them against verified rows, or the table's
  // stored ones match the checksum written with them): then the rows whose hashes match are the
  // source's, and each fetched row was checked on arrival.
  const Patched result(base, rb, delta.ids, delta.fetched.rows);
  std::vector<std::uint8_t> differs(d.num_blocks, 0);
  Parallel(delta.digest.verified && stats->by_rows ? 0 : d.num_blocks, 16,
           [&](std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t b = lo; b < hi; ++b) {
      const std::uint64_t first = b * br, last = std::min(d.rows, first + br);
      differs[b] = result.BlockChecksum(first, last) != delta.digest.block_checksums[b];
    }
  });
  for (std::uint64_t b = 0; b < d.num_blocks; ++b) {
    if (!differs[b]) continue;
    const std::uint64_t first = b * br, last = std::min(d.rows, first + br);
    std::vector<std::byte> block((last - first) * rb);
    EMBSTORE_RETURN_NOT_OK(FetchBlock(src, first, last, block, options, stats));
    delta.whole.emplace_back(b, std::move(block));
  }
  stats->check_seconds = Since(phase);
  stats->up_to_date = delta.ids.empty() && delta.whole.empty();
  return std::optional<Delta>(std::move(delta));
}

// Calls put(first_row, bytes) for each run of consecutive fetched rows held one after another,
// then for each block fetched whole (which wins over rows inside it: it comes after them).
template <typename Put>
Status ForEachPatch(const Delta& delta, std::size_t rb, std::uint64_t br, Put put) {
  const std::vector<const std::byte*>& at = delta.fetched.rows;
  for (std::size_t k = 0; k < delta.ids.size();) {
    std::size_t e = k + 1;  // a run: consecutive rows, held one after another
    while (e < delta.ids.size() && delta.ids[e] == delta.ids[e - 1] + 1 &&
           at[e] == at[e - 1] + rb) {
      ++e;
    }
    EMBSTORE_RETURN_NOT_OK(put(delta.ids[k], std::span<const std::byte>(at[k], (e - k) * rb)));
    k = e;
  }
  for (const auto& [b, block] : delta.whole) {
    EMBSTORE_RETURN_NOT_OK(put(b * br, std::span<const std::byte>(block)));
  }
  return Status::OK();
}

}  // namespace

Result<UpdateStats> UpdateInPlace(RowSource& src, std::span<std::byte> rows,
                                  const ReadOptions& options,
                                  std::unique_ptr<CopyHashes> started) {
  const auto start = Clock::now();
  const TableDesc& d = src.desc();
  UpdateStats stats = StatsFor(d);
  if (rows.size() != stats.table_bytes) {
    stats.needs_full = true;
    stats.full_reason = "the copy holds " + std::to_string(rows.size()) + " bytes; table '" +
                        d.name + "' is now " + std::to_string(d.rows) + " x " +
                        std::to_string(d.dim) + " " + std::string(store::DTypeName(d.dtype)) +
                        " (" + std::to_string(stats.table_bytes) + " bytes)";
    return stats;
  }
  EMBSTORE_ASSIGN_OR_RETURN(
      auto delta, PlanDelta(src, rows, options, &stats,
                            started != nullptr ? std::move(started->hasher_) : nullptr));
  if (!delta) return stats;
  EMBSTORE_RETURN_NOT_OK(ForEachPatch(
      *delta, d.row_bytes, d.block_rows,
      [&](std::uint64_t first, std::span<const std::byte> bytes) {
        std::memcpy(rows.data() + first * d.row_bytes, bytes.data(), bytes.size());
        return Status::OK();
      }));
  stats.seconds = Since(start);
  return stats;
}

Result<UpdateStats> UpdateFile(RowSource& src, const std::string& path,
                               const UpdateFileOptions& options) {
  const auto start = Clock::now();
  const TableDesc& d = src.desc();
  UpdateStats stats = StatsFor(d);
  EMBSTORE_ASSIGN_OR_RETURN(auto old, store::Table::Open(path));
  if (old->rows() != d.rows || old->dim() != d.dim || old->dtype() != d.dtype) {
    stats.needs_full = true;
    stats.full_reason = "'" + path + "' is " + std::to_string(old->rows()) + " x " +
                        std::to_string(old->dim()) + " " +
                        std::string(store::DTypeName(old->dtype())) + "; table '" + d.name +
                        "' is now " + std::to_string(d.rows) + " x " + std::to_string(d.dim) +
                        " " + std::string(store::DTypeName(d.dtype));
    return stats;
  }
  if (store::ContentId(*old) == d.content_id && old->has_keys() == d.has_keys) {
    stats.up_to_date = true;
    stats.seconds = Since(start);
    return stats;
  }
  const std::size_t rb = d.row_bytes;
  const std::uint64_t br = d.block_rows;
  EMBSTORE_ASSIGN_OR_RETURN(std::span<const std::byte> base, old->RowBytes(0, d.rows));
  EMBSTORE_ASSIGN_OR_RETURN(auto delta, PlanDelta(src, base, options.read, &stats));
  if (!delta) return stats;
  EMBSTORE_RETURN_NOT_OK(old->CheckIntact());

  // The result's row hashes: the copy's, with the patched rows hashed again; its block checksums
  // are the source's, which every block of it now matches.
  std::vector<std::uint64_t> hashes = std::move(delta->local);
  EMBSTORE_RETURN_NOT_OK(ForEachPatch(
      *delta, rb, br, [&](std::uint64_t first, std::span<const std::byte> bytes) {
        for (std::size_t at = 0; at < bytes.size(); at += rb) {
          hashes[first + at / rb] = store::Checksum64(bytes.subspan(at, rb));
        }
        return Status::OK();
      }));

  const auto write_start = Clock::now();
  store::WriterOptions w;
  w.dtype = d.dtype;
  w.dim = d.dim;
  w.with_keys = d.has_keys;
  w.overwrite = true;
  w.block_rows = br;
  w.row_hashes = true;
  w.expected_rows = d.rows;  // space reserved up front: the copy below skips block allocation
  w.durable = options.durable;
  w.metadata = d.metadata;
  EMBSTORE_ASSIGN_OR_RETURN(auto writer, store::TableWriter::Create(path, w));
  // The copy's matrix moved by the kernel (its extents shared where the filesystem can), then the
  // changed rows written over it: the new file is written whole, and only the changed rows pass
  // through this process.
  EMBSTORE_RETURN_NOT_OK(writer->AppendMatrixFrom(old->fd(), old->data_offset(), d.rows,
                                                  delta->digest.block_checksums,
                                                  std::move(hashes)));
  stats.shared_extents = writer->matrix_shared();
  EMBSTORE_RETURN_NOT_OK(old->CheckIntact());
  EMBSTORE_RETURN_NOT_OK(ForEachPatch(
      *delta, rb, br, [&](std::uint64_t first, std::span<const std::byte> bytes) {
        return writer->PatchRows(first, bytes);
      }));
  if (d.has_keys) {
    EMBSTORE_ASSIGN_OR_RETURN(std::vector<std::string> keys, src.Keys(0, d.rows));
    std::vector<std::string_view> views(keys.begin(), keys.end());
    for (const auto& k : keys) stats.row_bytes_moved += k.size() + 4;
    EMBSTORE_RETURN_NOT_OK(writer->AppendKeys(views));
  }
  EMBSTORE_RETURN_NOT_OK(writer->Finish());
  stats.up_to_date = false;
  stats.write_seconds = Since(write_start);
  stats.seconds = Since(start);
  return stats;
}

}  // namespace embstore::client
