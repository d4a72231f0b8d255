// RowSource over a table sharded across servers by a manifest (row_source.h, sharded.h).
#include <cstring>
#include <mutex>

#include "embstore/client/row_source.h"
#include "embstore/client/sharded.h"
#include "embstore/store/dtype.h"
#include "sources.h"

namespace embstore::client {
namespace {

class ShardedSource final : public RowSource {
 public:
  ShardedSource(std::string path, std::unique_ptr<ShardedTable> table, bool allow_local,
                const std::vector<TableDesc>& shards)
      : path_(std::move(path)), table_(std::move(table)), allow_local_(allow_local) {
    const ShardManifest& m = table_->manifest();
    desc_.name = m.table;
    desc_.rows = m.rows;
    desc_.dim = m.dim;
    desc_.dtype = m.dtype;
    desc_.row_bytes = m.dim * store::DTypeSize(m.dtype);
    desc_.has_keys = !shards.empty();
    desc_.block_rows = 0;
    for (const auto& d : shards) {
      desc_.has_keys = desc_.has_keys && d.has_keys;
      desc_.block_rows = std::max(desc_.block_rows, d.block_rows);
      desc_.key_bytes += d.key_bytes;
    }
  }

  std::string_view kind() const override { return "sharded"; }
  const std::string& location() const override { return path_; }
  std::uint64_t transferred_bytes() const override { return transferred_.load(); }

  Result<LoadStats> CopyRows(std::uint64_t begin, std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options) override {
    LoadOptions o;
    static_cast<ReadOptions&>(o) = options;
    o.begin_row = begin;
    o.end_row = end;
    o.allow_local = allow_local_;
    EMBSTORE_ASSIGN_OR_RETURN(auto s, table_->Load(out, o));
    LoadStats stats;
    stats.rows = s.rows;
    stats.bytes = s.bytes;
    stats.wire_bytes = s.wire_bytes;
    stats.seconds = s.seconds;
    stats.resumes = s.resumes;
    stats.bad_chunks = s.bad_chunks;
    for (const auto& sh : s.shards) {
      stats.streams += sh.stats.streams;
      stats.local = stats.local || sh.stats.local;
    }
    transferred_ += stats.wire_bytes;
    return stats;
  }

  // A key's shard is not known from the key (shards split by rows), so the keys go to the
  // shards in turn: all of them to shard 0, then the ones it lacks to shard 1, and so on; a key
  // no shard holds is missing. Rows land in `out` in request order, as from any source.
  Result<KeyCopyResult> CopyKeys(std::span<const std::string> keys, std::span<std::byte> out,
                                 const ReadOptions& options) override {
    const std::uint64_t per_row = options.to_f32 ? desc_.dim * 4 : desc_.row_bytes;
    EMBSTORE_RETURN_NOT_OK(internal::CheckKeyLookup(desc_.name, desc_.has_keys, per_row,
                                                    keys.size(), out.size()));
    std::vector<std::uint32_t> pending(keys.size());  // indices into `keys` not found yet
    for (std::uint32_t i = 0; i < pending.size(); ++i) pending[i] = i;
    std::vector<std::string> asked;
    std::vector<std::byte> rows;
    const int shards = static_cast<int>(table_->manifest().shards.size());
    for (int i = 0; i < shards && !pending.empty(); ++i) {
      EMBSTORE_ASSIGN_OR_RETURN(RowSource * shard, Shard(i));
      const bool all = pending.size() == keys.size();
      if (!all) {
        asked.clear();
        for (std::uint32_t k : pending) asked.push_back(keys[k]);
        rows.resize(asked.size() * per_row);
      }
      const std::uint64_t before = shard->transferred_bytes();
      auto found = all ? shard->CopyKeys(keys, out, options)
                       : shard->CopyKeys(asked, std::span<std::byte>(rows), options);
      transferred_ += shard->transferred_bytes() - before;
      if (!found.ok()) {
        return Status(found.status().code(),
                      table_->ShardName(i) + ": " + found.status().message());
      }
      // found->missing indexes what was asked.
      std::vector<char> absent(pending.size(), 0);
      for (std::uint32_t j : found->missing) {
        if (j >= absent.size()) {
          return Status::Internal(table_->ShardName(i) + ": lookup reported key index " +
                                  std::to_string(j) + " of " + std::to_string(absent.size()));
        }
        absent[j] = 1;
      }
      std::vector<std::uint32_t> still;
      for (std::uint32_t j = 0; j < pending.size(); ++j) {
        if (absent[j]) {
          still.push_back(pending[j]);
        } else if (!all) {
          std::memcpy(out.data() + std::uint64_t{pending[j]} * per_row,
                      rows.data() + std::uint64_t{j} * per_row, per_row);
        }
      }
      pending = std::move(still);
    }
    return KeyCopyResult{std::move(pending)};
  }

  Result<std::vector<std::string>> Keys(std::uint64_t begin, std::uint64_t end) override {
    if (!desc_.has_keys) return Status::FailedPrecondition("table '" + desc_.name + "' has no keys");
    return table_->Keys(begin, end);
  }

 private:
  // Shard `i`'s table as a source of its own (opened the first time a lookup needs it, and
  // checked against the manifest).
  Result<RowSource*> Shard(int i) {
    std::lock_guard<std::mutex> lock(mu_);
    if (shards_.empty()) shards_.resize(table_->manifest().shards.size());
    if (shards_[i] == nullptr) {
      auto src = OpenServerSource(table_->ShardConnect(i), table_->manifest().shards[i].table,
                                  allow_local_);
      if (!src.ok()) {
        return Status(src.status().code(), table_->ShardName(i) + ": " + src.status().message());
      }
      EMBSTORE_RETURN_NOT_OK(table_->CheckShard(i, (*src)->desc()));
      shards_[i] = std::move(*src);
    }
    return shards_[i].get();
  }

  std::string path_;
  std::unique_ptr<ShardedTable> table_;
  bool allow_local_;
  std::mutex mu_;
  std::vector<std::unique_ptr<RowSource>> shards_;  // guarded by mu_; for key lookups
  std::atomic<std::uint64_t> transferred_{0};
};

}  // namespace

Result<std::unique_ptr<RowSource>> OpenShardedSource(const std::string& manifest_path,
                                                     const ConnectOptions& connect,
                                                     bool allow_local, bool describe_shards) {
  EMBSTORE_ASSIGN_OR_RETURN(auto manifest, ReadShardManifest(manifest_path));
  EMBSTORE_ASSIGN_OR_RETURN(auto table, ShardedTable::Open(std::move(manifest), connect));
  std::vector<TableDesc> shards;
  if (describe_shards) {
    EMBSTORE_ASSIGN_OR_RETURN(shards, table->DescribeShards());
  }
  return std::unique_ptr<RowSource>(
      new ShardedSource(manifest_path, std::move(table), allow_local, shards));
}

}  // namespace embstore::client
