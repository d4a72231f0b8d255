// RowSource over a table on a server (row_source.h): described once when opened; rows streamed
// by internal::StreamRows (pinned to that version), or read from the server's own file when it
// is this host's file.
#include <algorithm>
#include <cstring>
#include <mutex>

#include "embstore/client/row_source.h"
#include "embstore/store/checksum.h"
#include "embstore/store/dtype.h"
#include "file_reader.h"
#include "sources.h"

namespace embstore::client {
namespace {

class ServerSource final : public RowSource {
 public:
  ServerSource(std::unique_ptr<Client> client, TableDesc desc,
               std::unique_ptr<internal::FileReader> local)
      : client_(std::move(client)), local_(std::move(local)) {
    desc_ = std::move(desc);
  }

  std::string_view kind() const override { return "server"; }
  const std::string& location() const override { return client_->target(); }
  const store::Table* local_table() const override { return local_ ? &local_->table() : nullptr; }
  std::uint64_t transferred_bytes() const override { return transferred_.load(); }

  Result<LoadStats> CopyRows(std::uint64_t begin, std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options) override {
    if (local_) {
      if (options.on_event) {
        options.on_event({LoadEvent::Kind::kLocal, 0, begin,
                          "reading " + desc_.file->path + " directly"});
      }
      return local_->CopyRows(begin, end, out, options, desc_.name);
    }
    return Counted(internal::StreamRows(*client_, desc_, begin, end, out, options));
  }

  Result<LoadStats> WriteRows(std::uint64_t begin, std::uint64_t end, RowSink& sink,
                              const ReadOptions& options) override {
    const bool convert = options.to_f32 && desc_.dtype != store::DType::kF32;
    if (local_ || convert || sink.ordered()) {
      return RowSource::WriteRows(begin, end, sink, options);
    }
    // Streamed: every chunk goes from gRPC's receive buffers to the sink, verified on the way.
    return Counted(internal::StreamRowsInto(*client_, desc_, begin, end, sink, options));
  }

  Result<KeyCopyResult> CopyKeys(std::span<const std::string> keys, std::span<std::byte> out,
                                 const ReadOptions& options) override {
    if (local_) {
      return internal::CopyKeysFromTable(local_->table(), desc_.name, keys, out, options);
    }
    const std::uint64_t per_row = options.to_f32 ? desc_.dim * 4 : desc_.row_bytes;
    EMBSTORE_RETURN_NOT_OK(internal::CheckKeyLookup(desc_.name, desc_.has_keys, per_row,
                                                    keys.size(), out.size()));
    // The server verifies each row's block and sends a checksum per row, which the client
    // checks (docs/PROTOCOL.md, "Lookup").
    EMBSTORE_ASSIGN_OR_RETURN(auto found, client_->LookupKeys(desc_.name, keys));
    internal::ScatterLookup(found.data, found.missing, keys.size(), found.dtype, found.dim,
                            options.to_f32, out);
    return KeyCopyResult{std::move(found.missing)};
  }

  Result<std::vector<std::string>> Keys(std::uint64_t begin, std::uint64_t end) override {
    if (local_) return internal::KeysFromTable(local_->table(), desc_.name, begin, end);
    return client_->Keys(desc_.name, begin, end);
  }

  Result<RowDigest> Digest() override {
    if (local_) return internal::DigestOfTable(local_->table());
    RowDigest d;
    EMBSTORE_RETURN_NOT_OK(client_->RowHashes(desc_.name, desc_.content_id, desc_.rows,
                                              &d.row_hashes, &d.block_checksums, &d.bytes,
                                              &d.verified));
    EMBSTORE_RETURN_NOT_OK(CheckBlockCount(d));
    transferred_ += d.bytes;
    return d;
  }

  // One hash per group of kDigestGroupRows rows, then the row hashes of the groups that differ:
  // for the seed table with 1% of its rows changed at random ids, 0.47 MB of group hashes and
  // 1.1 MB of row hashes (15% of the groups) instead of 7.5 MB. They come segment by segment as
  // the copy is hashed (Client::RowHashesAgainst), and each segment's rows whose hashes differ
  // are looked up at once, so that the sync's CopyRowIds finds them here: the lookups overlap
  // the hashing of the copy's later rows instead of following it (in memory, the seed table with
  // 1% of its rows changed at random ids: 0.065-0.096 s against 0.073-0.109 s without).
  Result<RowDigest> DigestAgainst(
      const std::function<std::span<const std::uint64_t>(std::uint64_t)>& local) override {
    if (local_) return internal::DigestOfTable(local_->table());
    {
      std::lock_guard lock(mu_);
      prefetched_.clear();
    }
    std::atomic<std::uint64_t> budget{kPrefetchBytes / desc_.row_bytes};
    std::atomic<std::uint64_t> prefetched_bytes{0};
    auto arrived = [&](std::span<const std::uint64_t> groups, std::span<const std::uint64_t> hashes,
                       std::span<const std::uint64_t> mine) -> Status {
      Prefetched p;
      store::AppendDifferingRows(groups, kDigestGroupRows, desc_.rows, hashes, mine, &p.ids);
      // Beyond the budget the rows are left to CopyRowIds, which holds them once.
      const std::uint64_t n = p.ids.size();
      std::uint64_t left = budget.load();
      do {
        if (n == 0 || left < n) return Status::OK();
      } while (!budget.compare_exchange_weak(left, left - n));
      std::uint64_t wire = 0;
      EMBSTORE_RETURN_NOT_OK(client_->LookupRowsHeld(desc_.name, p.ids, desc_.content_id,
                                                     desc_.row_bytes, &p.rows, &wire));
      prefetched_bytes += wire;
      std::lock_guard lock(mu_);
      prefetched_.push_back(std::move(p));
      return Status::OK();
    };
    RowDigest d;
    EMBSTORE_RETURN_NOT_OK(client_->RowHashesAgainst(
        desc_.name, desc_.content_id, desc_.rows, kDigestGroupRows, local, arrived,
        &d.group_rows, &d.groups, &d.row_hashes, &d.block_checksums, &d.bytes, &d.verified));
    EMBSTORE_RETURN_NOT_OK(CheckBlockCount(d));
    d.row_bytes = prefetched_bytes.load();
    transferred_ += d.bytes + d.row_bytes;
    return d;
  }

  // By id, pinned to the version opened: each row comes with its checksum, which is checked. Rows
  // that DigestAgainst looked up already are taken from there (once).
  Result<LoadStats> CopyRowIds(std::span<const std::uint64_t> ids, std::span<std::byte> out,
                               const ReadOptions& options) override {
    if (local_) return internal::CopyRowIdsFromTable(local_->table(), desc_, ids, out);
    const std::size_t rb = desc_.row_bytes;
    if (out.size() != ids.size() * rb) {
      return Status::InvalidArgument("buffer for " + std::to_string(ids.size()) +
                                     " rows of table '" + desc_.name + "' holds " +
                                     std::to_string(out.size()) + " bytes");
    }
    HeldRows held;
    EMBSTORE_ASSIGN_OR_RETURN(LoadStats s, HoldRowIds(ids, &held, options));
    for (std::size_t k = 0; k < ids.size(); ++k) std::memcpy(out.data() + k * rb, held.rows[k], rb);
    return s;
  }

  // The rows DigestAgainst looked up stay in the memory they arrived in (taken once); the rest
  // are looked up into one more piece.
  Result<LoadStats> HoldRowIds(std::span<const std::uint64_t> ids, HeldRows* held,
                               const ReadOptions& options) override {
    if (local_) return RowSource::HoldRowIds(ids, held, options);
    const std::size_t rb = desc_.row_bytes;
    std::vector<Prefetched> ready;
    {
      std::lock_guard lock(mu_);
      ready.swap(prefetched_);
    }
    // Every prefetched row, by id (the segments are disjoint row ranges).
    std::vector<std::pair<std::uint64_t, const std::byte*>> have;
    for (const Prefetched& p : ready) {
      for (std::size_t k = 0; k < p.ids.size(); ++k) have.emplace_back(p.ids[k], p.rows.rows[k]);
    }
    std::sort(have.begin(), have.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    held->rows.assign(ids.size(), nullptr);
    held->pieces.clear();
    std::vector<std::uint64_t> rest;
    std::vector<std::size_t> rest_at;
    auto h = have.begin();
    for (std::size_t i = 0; i < ids.size(); ++i) {
      h = std::lower_bound(h, have.end(), ids[i],
                           [](const auto& row, std::uint64_t id) { return row.first < id; });
      if (h != have.end() && h->first == ids[i]) {
        held->rows[i] = h->second;
      } else {
        rest.push_back(ids[i]);
        rest_at.push_back(i);
      }
    }
    for (Prefetched& p : ready) {
      for (auto& piece : p.rows.pieces) held->pieces.push_back(std::move(piece));
    }
    LoadStats s;
    s.rows = ids.size();
    s.bytes = ids.size() * rb;
    s.content_id = desc_.content_id;
    if (rest.empty()) return s;
    HeldRows looked_up;
    std::uint64_t wire = 0;
    EMBSTORE_RETURN_NOT_OK(
        client_->LookupRowsHeld(desc_.name, rest, desc_.content_id, rb, &looked_up, &wire));
    for (std::size_t k = 0; k < rest.size(); ++k) held->rows[rest_at[k]] = looked_up.rows[k];
    for (auto& piece : looked_up.pieces) held->pieces.push_back(std::move(piece));
    s.wire_bytes = wire;
    transferred_ += wire;
    return s;
  }

 private:
  // Rows a group hash covers in DigestAgainst. For the seed table with 1% of its rows changed at
  // random, 16 moves 1.6 MB, near the fewest (8: 1.5 MB, 32: 2.1 MB); with 0.1% changed, 0.6 MB
  // (8: 1.0 MB).
  static constexpr std::uint32_t kDigestGroupRows = 16;

  Status CheckBlockCount(const RowDigest& d) const {
    if (d.block_checksums.size() == desc_.num_blocks) return Status::OK();
    return Status::Internal("server '" + client_->target() + "' sent " +
                            std::to_string(d.block_checksums.size()) + " block checksums of '" +
                            desc_.name + "', which has " + std::to_string(desc_.num_blocks) +
                            " blocks");
  }

  Result<LoadStats> Counted(Result<LoadStats> stats) {
    if (stats.ok()) transferred_ += stats->wire_bytes;
    return stats;
  }

  // Rows a sync's DigestAgainst looked up, for its CopyRowIds: at most this many bytes (rows past
  // them are looked up by CopyRowIds).
  static constexpr std::uint64_t kPrefetchBytes = 64ull << 20;
  struct Prefetched {
    std::vector<std::uint64_t> ids;  // ascending
    HeldRows rows;  // ids.size() rows, each checked against its checksum
  };

  std::unique_ptr<Client> client_;
  std::unique_ptr<internal::FileReader> local_;  // the server's file, when it is this host's
  std::atomic<std::uint64_t> transferred_{0};
  std::mutex mu_;
  std::vector<Prefetched> prefetched_;  // guarded by mu_
};

}  // namespace

namespace internal {

void ScatterLookup(std::span<const std::byte> data, const std::vector<std::uint32_t>& missing,
                   std::size_t requested, store::DType dtype, std::uint64_t dim, bool to_f32,
                   std::span<std::byte> out) {
  const std::size_t row_bytes = dim * store::DTypeSize(dtype);
  const std::size_t out_row = to_f32 ? dim * 4 : row_bytes;
  std::size_t next_missing = 0, src = 0;
  for (std::size_t i = 0; i < requested; ++i) {
    if (next_missing < missing.size() && missing[next_missing] == i) {
      ++next_missing;
      continue;
    }
    auto row = data.subspan(src * row_bytes, row_bytes);
    auto dst = out.subspan(i * out_row, out_row);
    if (to_f32) {
      store::ConvertToF32(dtype, row, std::span<float>(reinterpret_cast<float*>(dst.data()), dim));
    } else {
      std::copy(row.begin(), row.end(), dst.begin());
    }
    ++src;
  }
}

}  // namespace internal

Result<std::unique_ptr<RowSource>> OpenServerSource(const ConnectOptions& connect,
                                                    const std::string& table, bool allow_local,
                                                    std::chrono::milliseconds open_timeout) {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (open_timeout.count() > 0) deadline = std::chrono::steady_clock::now() + open_timeout;
  EMBSTORE_ASSIGN_OR_RETURN(auto client, Client::Connect(connect));
  EMBSTORE_ASSIGN_OR_RETURN(TableDesc desc, client->Describe(table, deadline));
  std::unique_ptr<internal::FileReader> local;
  if (allow_local) {
    auto reader = internal::FileReader::OpenServersFile(desc);
    if (reader.ok()) local = std::move(reader).value();
  }
  return std::unique_ptr<RowSource>(
      new ServerSource(std::move(client), std::move(desc), std::move(local)));
}

}  // namespace embstore::client
