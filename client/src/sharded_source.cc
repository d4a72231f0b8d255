// RowSource over a table sharded across servers by a manifest (row_source.h, sharded.h).
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

  Result<KeyCopyResult> CopyKeys(std::span<const std::string>, std::span<std::byte>,
                                 const ReadOptions&) override {
    return Status::Unimplemented("key lookups are not supported through shard manifest '" +
                                 path_ + "'; load rows, or look keys up on the shard's server");
  }

  Result<std::vector<std::string>> Keys(std::uint64_t begin, std::uint64_t end) override {
    if (!desc_.has_keys) return Status::FailedPrecondition("table '" + desc_.name + "' has no keys");
    return table_->Keys(begin, end);
  }

 private:
  std::string path_;
  std::unique_ptr<ShardedTable> table_;
  bool allow_local_;
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
