// Delta syncs (update.h): compare the source's digest with the copy, fetch the rows that differ,
// check every block of the result, then apply (in memory) or write a new file (UpdateFile).
#include "embstore/client/update.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <linux/magic.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <iterator>
#include <latch>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "embstore/common/atomic_file.h"
#include "embstore/common/mapping_guard.h"
#include "embstore/common/read_file.h"
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
  std::span<std::uint64_t> WaitUpTo(std::uint64_t upto) {
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
  std::vector<std::byte> donated;  // rows read from the donor (PlanDelta), where fetched points
  std::vector<std::pair<std::uint64_t, std::vector<std::byte>>> whole;  // (block, its rows)
};

// Another local copy of a table's rows: the file a spare replaces, which holds the version of
// the sync before (the spare is a version older still).
struct Donor {
  const store::Table* table = nullptr;
  std::string path;
};

// nullopt when the source has no digest (stats->needs_full says why).
//
// With a `donor` that stores row hashes, the copy compared with the source is the one the patch
// would make of `base` and the donor together: where a row's hash in `base` differs from the hash
// the donor stores for it, the donor's row counts, by that stored hash. So the source is asked
// only for the rows that differ from the donor's version (the last sync's rows are not fetched
// again), and the donor's rows that hold the source's version are read from it (pread, on every
// core: mapped, they faulted in a page at a time, 2 us a row) and hashed from their bytes; one
// whose bytes do not match is fetched after all. A stored hash only picks rows: every row of the
// result is one whose bytes were hashed here or one fetched and checked.
Result<std::optional<Delta>> PlanDelta(RowSource& src, std::span<const std::byte> base,
                                       const ReadOptions& options, UpdateStats* stats,
                                       std::unique_ptr<CopyHashes::Hasher> hasher = nullptr,
                                       const Donor* donor = nullptr) {
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
  const store::Table* hints =
      donor != nullptr && donor->table->has_row_hashes() ? donor->table : nullptr;
  std::vector<std::uint64_t> donated;  // rows where the donor's stored hash stands in, ascending
  std::mutex hint_mu;
  std::uint64_t hinted = 0;  // rows [0, hinted) have had the donor's hashes put in
  auto hint = [&](std::span<std::uint64_t> local, std::uint64_t upto) {
    std::lock_guard lock(hint_mu);
    for (; hinted < std::min<std::uint64_t>(upto, d.rows); ++hinted) {
      const std::uint64_t stored = hints->StoredRowHash(hinted);
      if (local[hinted] == stored) continue;
      local[hinted] = stored;
      donated.push_back(hinted);
    }
  };
  auto digest_or = DigestOf(
      src,
      [&](std::uint64_t upto) -> std::span<const std::uint64_t> {
        std::span<std::uint64_t> local = hasher->WaitUpTo(upto);
        if (hints != nullptr) hint(local, upto);
        return local;
      },
      stats);
  delta.local = hasher->Take();
  stats->digest_seconds = Since(start);
  EMBSTORE_ASSIGN_OR_RETURN(auto digest, std::move(digest_or));
  if (!digest) return std::optional<Delta>();
  delta.digest = std::move(*digest);
  if (hints != nullptr) {
    if (stats->by_rows) {
      hint(delta.local, d.rows);
    } else {  // compared by blocks of `base` itself: its own hashes back
      for (const std::uint64_t r : donated) {
        delta.local[r] = store::Checksum64(base.subspan(r * rb, rb));
      }
      donated.clear();
    }
  }
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
  if (donated.empty()) {
    EMBSTORE_ASSIGN_OR_RETURN(delta.fetched, Fetch(src, delta.ids, options, stats));
  } else {
    // The donor's rows not fetched anyway: read, and kept where their bytes hash to what the
    // source holds (the stored hash, which the source's matched).
    std::vector<std::uint64_t> take;
    std::set_difference(donated.begin(), donated.end(), delta.ids.begin(), delta.ids.end(),
                        std::back_inserter(take));
    delta.donated.resize(take.size() * rb);
    std::vector<std::uint8_t> same(take.size(), 0);
    std::vector<Status> read(std::max(1u, std::thread::hardware_concurrency()));
    std::atomic<unsigned> slot{0};
    const store::Table& t = *donor->table;
    const std::string reading = "read the rows of '" + donor->path + "'";
    Parallel(take.size(), 1024, [&](std::uint64_t lo, std::uint64_t hi) {
      Status& st = read[slot++];
      for (std::uint64_t k = lo; k < hi && st.ok(); ++k) {
        const std::span<std::byte> row(delta.donated.data() + k * rb, rb);
        st = ReadAllAt(t.fd(), t.data_offset() + take[k] * rb, row, reading);
        same[k] = st.ok() && store::Checksum64(row) == delta.local[take[k]];
      }
    });
    for (const Status& st : read) EMBSTORE_RETURN_NOT_OK(st);
    std::vector<std::uint64_t> fetch = delta.ids;
    for (std::size_t k = 0; k < take.size(); ++k) {
      if (!same[k]) fetch.push_back(take[k]);
    }
    std::sort(fetch.begin(), fetch.end());
    EMBSTORE_ASSIGN_OR_RETURN(HeldRows fetched, Fetch(src, fetch, options, stats));
    // Every row to write, ascending, each where it is held.
    std::vector<std::uint64_t> ids;
    std::vector<const std::byte*> at;
    ids.reserve(fetch.size() + take.size());
    at.reserve(fetch.size() + take.size());
    for (std::size_t f = 0, k = 0; f < fetch.size() || k < take.size();) {
      while (k < take.size() && !same[k]) ++k;
      if (k < take.size() && (f == fetch.size() || take[k] < fetch[f])) {
        ids.push_back(take[k]);
        at.push_back(delta.donated.data() + k * rb);
        ++k;
      } else if (f < fetch.size()) {
        ids.push_back(fetch[f]);
        at.push_back(fetched.rows[f]);
        ++f;
      }
    }
    stats->spare_rows = ids.size() - fetch.size();
    delta.ids = std::move(ids);
    delta.fetched.pieces = std::move(fetched.pieces);
    delta.fetched.rows = std::move(at);
  }
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

std::string SparePath(const std::string& path) { return AtomicFile::SparePath(path); }

namespace {

// The result's row hashes: the copy's, with the patched rows hashed again. (Its block checksums
// are the source's, which every block of it now matches.)
Result<std::vector<std::uint64_t>> ResultHashes(Delta& delta, std::size_t rb, std::uint64_t br) {
  std::vector<std::uint64_t> hashes = std::move(delta.local);
  EMBSTORE_RETURN_NOT_OK(ForEachPatch(
      delta, rb, br, [&](std::uint64_t first, std::span<const std::byte> bytes) {
        for (std::size_t at = 0; at < bytes.size(); at += rb) {
          hashes[first + at / rb] = store::Checksum64(bytes.subspan(at, rb));
        }
        return Status::OK();
      }));
  return hashes;
}

// The rest of the new version once its matrix is written: its keys (from the source), then
// Finish.
Status FinishVersion(RowSource& src, store::TableWriter& writer, UpdateStats* stats) {
  const TableDesc& d = src.desc();
  if (d.has_keys) {
    EMBSTORE_ASSIGN_OR_RETURN(std::vector<std::string> keys, src.Keys(0, d.rows));
    std::vector<std::string_view> views(keys.begin(), keys.end());
    for (const auto& k : keys) stats->row_bytes_moved += k.size() + 4;
    EMBSTORE_RETURN_NOT_OK(writer.AppendKeys(views));
  }
  return writer.Finish();
}

// A shared mapping of a file's first `size` bytes, read in order (MADV_SEQUENTIAL: unmapping
// it then leaves the pages' recency alone, which took a third of the unmapping's time here),
// unmapped when it goes. `writable`: rows may be written through it. Guarded (MappingGuard): a
// file cut short underneath reads as zeros and poisoned() says so, instead of a SIGBUS.
class Mapping {
 public:
  static Result<Mapping> Of(int fd, std::uint64_t size, bool writable, const std::string& path) {
    void* p = ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                     MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return Status::FromErrno("map '" + path + "'", errno);
    Mapping m(static_cast<std::byte*>(p), size);
    ::madvise(p, size, MADV_SEQUENTIAL);
    EMBSTORE_ASSIGN_OR_RETURN(m.guard_, MappingGuard::Register(m.bytes()));
    return m;
  }
  Mapping(Mapping&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), size_(o.size_), guard_(std::move(o.guard_)) {}
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    guard_.reset();
    if (p_ != nullptr) ::munmap(p_, size_);
  }
  std::span<std::byte> bytes() const { return {p_, size_}; }
  bool poisoned() const { return guard_ != nullptr && guard_->poisoned(); }

 private:
  Mapping(std::byte* p, std::uint64_t size) : p_(p), size_(size) {}
  std::byte* p_;
  std::uint64_t size_;
  std::unique_ptr<MappingGuard> guard_;
};

// Whether rows can be written into the file through a mapping without risk: on tmpfs, where the
// pages are memory, with every page of the file allocated (no holes), so that a write never
// needs space (elsewhere a write through a mapping that needs a block on a full disk is a SIGBUS,
// not an error).
bool WritableInPlace(int fd) {
  struct statfs fs;
  struct stat st;
  return ::fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC && ::fstat(fd, &st) == 0 &&
         static_cast<std::uint64_t>(st.st_blocks) * 512 >= static_cast<std::uint64_t>(st.st_size);
}

// Holds an exclusive flock on a descriptor while it lives.
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(::flock(fd, LOCK_EX) == 0 ? fd : -1) {}
  ~FileLock() {
    if (fd_ >= 0) ::flock(fd_, LOCK_UN);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

// Members in the order they are set up; they go in the reverse one (the hashing stops before the
// mapping it reads goes, the spare's lease goes before the file's lock, the lock before the file).
struct PreparedFile::State {
  std::string path;
  UpdateFileOptions options;
  std::shared_ptr<const store::Table> current;
  std::optional<FileLock> lock;
  std::string spare_note;  // why no spare is used, when none is
  std::unique_ptr<AtomicFile> spare;  // taken: under a write lease
  std::uint64_t spare_data_offset = 0;
  bool through_mapping = false;
  std::optional<Mapping> mapped;  // the spare, its first spare_data_offset + matrix bytes
  std::unique_ptr<CopyHashes::Hasher> hasher;  // of the spare's rows, from the moment it is taken

  // Takes the spare and starts hashing it, or says in spare_note why not.
  Status TakeSpare();
};

PreparedFile::PreparedFile(std::unique_ptr<State> state) : state_(std::move(state)) {}
PreparedFile::~PreparedFile() = default;

Status PreparedFile::State::TakeSpare() {
  const std::string spare_path = SparePath(path);
  // Syncs of one file with spares take turns (each moves the spare's name), on the file's inode;
  // one that finds the file replaced by the one before it writes a new file.
  lock.emplace(current->fd());
  struct stat now, mine;
  if (::stat(path.c_str(), &now) != 0 || ::fstat(current->fd(), &mine) != 0 ||
      now.st_ino != mine.st_ino || now.st_dev != mine.st_dev) {
    spare_note = "'" + path + "' was replaced during this update";
    return Status::OK();
  }
  // The spare's shape, from its header; closed again before it is taken (the lease needs it
  // unopened). A spare left unused here is replaced when the new file keeps the current one.
  {
    auto t = store::Table::Open(spare_path);
    if (!t.ok()) {
      spare_note = PathExists(spare_path)
                       ? "the spare could not be read (" + t.status().message() + ")"
                       : "there is no spare yet";
      return Status::OK();
    }
    const store::Table& s = **t;
    if (s.rows() != current->rows() || s.dim() != current->dim() ||
        s.dtype() != current->dtype()) {
      spare_note = "the spare is " + std::to_string(s.rows()) + " x " + std::to_string(s.dim()) +
                   " " + std::string(store::DTypeName(s.dtype()));
      return Status::OK();
    }
    spare_data_offset = s.data_offset();
  }
  auto adopted = AtomicFile::AdoptSpare(path, spare_path);
  if (!adopted.ok()) {
    spare_note = adopted.status().message();
    return Status::OK();
  }
  const int fd = (*adopted)->fd();
  const std::size_t rb = current->row_bytes();
  const std::uint64_t matrix_end = spare_data_offset + current->rows() * rb;
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < matrix_end) {
    spare_note = "the spare '" + spare_path + "' is shorter than its matrix";
    return Status::OK();
  }
  through_mapping = WritableInPlace(fd);
  EMBSTORE_ASSIGN_OR_RETURN(Mapping m, Mapping::Of(fd, matrix_end, through_mapping, spare_path));
  mapped.emplace(std::move(m));
  spare = std::move(*adopted);
  if (rb > 0) {
    hasher = std::make_unique<CopyHashes::Hasher>(
        mapped->bytes().subspan(spare_data_offset, current->rows() * rb), rb);
  }
  return Status::OK();
}

Result<std::unique_ptr<PreparedFile>> PrepareUpdateFile(const std::string& path,
                                                        const UpdateFileOptions& options) {
  auto p = std::make_unique<PreparedFile::State>();
  p->path = path;
  p->options = options;
  EMBSTORE_ASSIGN_OR_RETURN(p->current, store::Table::Open(path));
  if (options.spare) EMBSTORE_RETURN_NOT_OK(p->TakeSpare());
  return std::unique_ptr<PreparedFile>(new PreparedFile(std::move(p)));
}

namespace {

// UpdateFile by the spare `p` took: nullopt when it cannot be used after all, with
// stats->spare_note saying why; the caller then writes a new file.
Result<std::optional<UpdateStats>> UpdateSpare(RowSource& src, PreparedFile::State& p,
                                               const store::WriterOptions& w,
                                               UpdateStats* stats) {
  const TableDesc& d = src.desc();
  const std::size_t rb = d.row_bytes;
  auto writer = store::TableWriter::Adopt(p.path, w, std::move(p.spare), p.spare_data_offset);
  if (!writer.ok()) {
    if (writer.status().code() != StatusCode::kFailedPrecondition) return writer.status();
    stats->spare_note = writer.status().message();
    return std::optional<UpdateStats>();
  }
  const std::span<std::byte> base =
      p.mapped->bytes().subspan(p.spare_data_offset, d.rows * rb);
  const Donor donor{p.current.get(), p.path};
  UpdateStats s = *stats;
  EMBSTORE_ASSIGN_OR_RETURN(
      auto delta, PlanDelta(src, base, p.options.read, &s, std::move(p.hasher), &donor));
  if (!delta) return std::optional<UpdateStats>(s);
  EMBSTORE_RETURN_NOT_OK(p.current->CheckIntact());
  const std::string cut = "the spare was cut short while it was read";
  if (p.mapped->poisoned()) {
    stats->spare_note = cut;
    return std::optional<UpdateStats>();
  }
  EMBSTORE_ASSIGN_OR_RETURN(std::vector<std::uint64_t> hashes,
                            ResultHashes(*delta, rb, d.block_rows));
  const auto write_start = Clock::now();
  store::TableWriter& out = **writer;
  EMBSTORE_RETURN_NOT_OK(
      out.MatrixInPlace(d.rows, delta->digest.block_checksums, std::move(hashes)));
  // On tmpfs the rows are copied in through the mapping: one write() per changed row cost more
  // than the rest of the patch (9,382 rows of 512 bytes: about 20 ms).
  EMBSTORE_RETURN_NOT_OK(ForEachPatch(
      *delta, rb, d.block_rows, [&](std::uint64_t first, std::span<const std::byte> bytes) {
        if (!p.through_mapping) return out.PatchRows(first, bytes);
        std::memcpy(base.data() + first * rb, bytes.data(), bytes.size());
        return Status::OK();
      }));
  if (p.mapped->poisoned()) {  // rows written into pages no longer the file's
    stats->spare_note = cut;
    return std::optional<UpdateStats>();
  }
  const Status finished = FinishVersion(src, out, &s);
  if (finished.code() == StatusCode::kUnavailable) {  // someone opened it meanwhile: not swapped
    stats->spare_note = finished.message();
    return std::optional<UpdateStats>();
  }
  EMBSTORE_RETURN_NOT_OK(finished);
  s.up_to_date = false;
  s.used_spare = true;
  s.write_seconds = Since(write_start);
  return std::optional<UpdateStats>(std::move(s));
}

}  // namespace

Result<UpdateStats> UpdateFile(RowSource& src, const std::string& path,
                               const UpdateFileOptions& options) {
  EMBSTORE_ASSIGN_OR_RETURN(auto prepared, PrepareUpdateFile(path, options));
  return UpdateFile(src, std::move(prepared));
}

Result<UpdateStats> UpdateFile(RowSource& src, std::unique_ptr<PreparedFile> prepared) {
  const auto start = Clock::now();
  const TableDesc& d = src.desc();
  UpdateStats stats = StatsFor(d);
  PreparedFile::State& p = *prepared->state_;
  const std::string& path = p.path;
  const store::Table& old = *p.current;
  if (old.rows() != d.rows || old.dim() != d.dim || old.dtype() != d.dtype) {
    stats.needs_full = true;
    stats.full_reason = "'" + path + "' is " + std::to_string(old.rows()) + " x " +
                        std::to_string(old.dim()) + " " +
                        std::string(store::DTypeName(old.dtype())) + "; table '" + d.name +
                        "' is now " + std::to_string(d.rows) + " x " + std::to_string(d.dim) +
                        " " + std::string(store::DTypeName(d.dtype));
    return stats;
  }
  if (store::ContentId(old) == d.content_id && old.has_keys() == d.has_keys) {
    stats.up_to_date = true;
    stats.seconds = Since(start);
    return stats;
  }
  const std::size_t rb = d.row_bytes;
  const std::uint64_t br = d.block_rows;
  store::WriterOptions w;
  w.dtype = d.dtype;
  w.dim = d.dim;
  w.with_keys = d.has_keys;
  w.overwrite = true;
  w.block_rows = br;
  w.row_hashes = true;
  w.expected_rows = d.rows;  // space reserved up front: the copy below skips block allocation
  w.durable = p.options.durable;
  w.metadata = d.metadata;
  if (p.options.spare) {
    stats.spare_note = p.spare_note;
    if (p.spare != nullptr) {
      EMBSTORE_ASSIGN_OR_RETURN(auto by_spare, UpdateSpare(src, p, w, &stats));
      if (by_spare) {
        by_spare->seconds = Since(start);
        return *std::move(by_spare);
      }
    }
    p.hasher.reset();
    p.mapped.reset();
    w.keep_replaced = SparePath(path);
  }
  EMBSTORE_ASSIGN_OR_RETURN(std::span<const std::byte> base, old.RowBytes(0, d.rows));
  EMBSTORE_ASSIGN_OR_RETURN(auto delta, PlanDelta(src, base, p.options.read, &stats));
  if (!delta) return stats;
  EMBSTORE_RETURN_NOT_OK(old.CheckIntact());
  EMBSTORE_ASSIGN_OR_RETURN(std::vector<std::uint64_t> hashes, ResultHashes(*delta, rb, br));

  const auto write_start = Clock::now();
  EMBSTORE_ASSIGN_OR_RETURN(auto writer, store::TableWriter::Create(path, w));
  // The copy's matrix moved by the kernel (its extents shared where the filesystem can), then the
  // changed rows written over it: the new file is written whole, and only the changed rows pass
  // through this process.
  EMBSTORE_RETURN_NOT_OK(writer->AppendMatrixFrom(old.fd(), old.data_offset(), d.rows,
                                                  delta->digest.block_checksums,
                                                  std::move(hashes)));
  stats.shared_extents = writer->matrix_shared();
  EMBSTORE_RETURN_NOT_OK(old.CheckIntact());
  EMBSTORE_RETURN_NOT_OK(ForEachPatch(
      *delta, rb, br, [&](std::uint64_t first, std::span<const std::byte> bytes) {
        return writer->PatchRows(first, bytes);
      }));
  EMBSTORE_RETURN_NOT_OK(FinishVersion(src, *writer, &stats));
  stats.up_to_date = false;
  stats.write_seconds = Since(write_start);
  stats.seconds = Since(start);
  return stats;
}

}  // namespace embstore::client
