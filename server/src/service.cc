#include "service.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "embstore/proto/dtype.h"
#include "embstore/proto/table_info.h"
#include "embstore/store/table_desc.h"
#include "embstore/store/checksum.h"
#include "embstore/store/format.h"

namespace embstore::server {
namespace {

using proto::ToProto;

std::string Quote(const std::string& table) { return "table '" + table + "'"; }

// Validates [begin, end) against a table of `rows` rows (PROTOCOL.md, "Row ranges").
Status CheckRange(const std::string& table, std::uint64_t rows, std::uint64_t begin,
                  std::uint64_t end) {
  if (begin > rows) {
    return Status::OutOfRange("begin_row " + std::to_string(begin) + " is past the end of " +
                              Quote(table) + ", which has " + std::to_string(rows) + " rows");
  }
  if (end > rows) {
    return Status::OutOfRange("end_row " + std::to_string(end) + " is past the end of " +
                              Quote(table) + ", which has " + std::to_string(rows) + " rows");
  }
  if (begin > end) {
    return Status::InvalidArgument("begin_row " + std::to_string(begin) + " is after end_row " +
                                   std::to_string(end) + " for " + Quote(table));
  }
  return Status::OK();
}

// Asks the kernel to start reading [begin, end) of a mapping, widened to whole pages.
void AdviseWillNeed(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto b = reinterpret_cast<std::uintptr_t>(bytes.data()) & ~(page - 1);
  auto e = reinterpret_cast<std::uintptr_t>(bytes.data() + bytes.size());
  // Advice is a hint; a failure (e.g. a truncated file) changes nothing about correctness.
  (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_WILLNEED);
}

}  // namespace

Service::Service(std::shared_ptr<Catalog> catalog, ServiceOptions options)
    : catalog_(std::move(catalog)), options_(options) {}

void Service::FillTableInfo(const TableEntry& entry, bool with_metadata, v1::TableInfo* info) {
  store::TableDesc d = store::DescribeTable(entry.table(), entry.name(), entry.content_id());
  d.generation = entry.generation();
  d.file = store::ServerFile{entry.path(), entry.file()};
  proto::ToTableInfo(d, with_metadata, info);
}

Result<std::shared_ptr<const TableEntry>> Service::Resolve(
    const std::string& table, const std::optional<std::uint64_t>& expected) const {
  EMBSTORE_ASSIGN_OR_RETURN(auto entry, catalog_->Get(table));
  if (expected.has_value() && *expected != entry->content_id()) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "expected content_id %016llx but it is now %016llx",
                  static_cast<unsigned long long>(*expected),
                  static_cast<unsigned long long>(entry->content_id()));
    return Status::FailedPrecondition(Quote(table) + " changed: " + buf + " (generation " +
                                      std::to_string(entry->generation()) +
                                      "); restart the read from the beginning");
  }
  return entry;
}

Result<v1::ListTablesResponse> Service::ListTables(const v1::ListTablesRequest&) const {
  v1::ListTablesResponse out;
  for (const auto& e : catalog_->List()) FillTableInfo(*e, false, out.add_tables());
  return out;
}

Result<v1::TableInfo> Service::DescribeTable(const v1::DescribeTableRequest& request) const {
  EMBSTORE_ASSIGN_OR_RETURN(auto entry, Resolve(request.table(), std::nullopt));
  v1::TableInfo info;
  FillTableInfo(*entry, true, &info);
  return info;
}

Result<std::unique_ptr<RowStream>> Service::StreamRows(const v1::StreamRowsRequest& r) const {
  std::optional<std::uint64_t> expected;
  if (r.has_expected_content_id()) expected = r.expected_content_id();
  EMBSTORE_ASSIGN_OR_RETURN(auto entry, Resolve(r.table(), expected));
  const store::Table& t = entry->table();
  const std::uint64_t end = r.has_end_row() ? r.end_row() : t.rows();
  EMBSTORE_RETURN_NOT_OK(CheckRange(r.table(), t.rows(), r.begin_row(), end));

  const std::uint64_t row_bytes = std::max<std::uint64_t>(t.row_bytes(), 1);
  if (row_bytes > options_.max_chunk_bytes) {
    return Status::FailedPrecondition("rows of " + Quote(r.table()) + " are " +
                                      std::to_string(row_bytes) +
                                      " bytes, more than the largest chunk this server sends (" +
                                      std::to_string(options_.max_chunk_bytes) + " bytes)");
  }
  // The default is at least one row, so a request that says 0 always works.
  std::uint64_t budget =
      r.chunk_bytes() == 0 ? std::max(options_.default_chunk_bytes, row_bytes) : r.chunk_bytes();
  if (budget > options_.max_chunk_bytes) {
    return Status::InvalidArgument("chunk_bytes " + std::to_string(budget) +
                                   " is more than the server's limit of " +
                                   std::to_string(options_.max_chunk_bytes) + " bytes");
  }
  if (budget < row_bytes) {
    return Status::InvalidArgument("chunk_bytes " + std::to_string(budget) +
                                   " is smaller than one row of " + Quote(r.table()) + " (" +
                                   std::to_string(row_bytes) + " bytes)");
  }

  auto s = std::make_unique<RowStream>();
  s->entry_ = entry;
  s->begin_ = s->next_ = r.begin_row();
  s->end_ = end;
  s->readahead_bytes_ = options_.readahead_bytes;
  const std::uint64_t block_rows = std::max<std::uint64_t>(t.block_rows(), 1);
  const std::uint64_t block_bytes = block_rows * row_bytes;
  if (block_bytes <= budget) {
    s->aligned_ = true;
    s->chunk_rows_ = (budget / block_bytes) * block_rows;
  } else {
    s->aligned_ = false;
    s->chunk_rows_ = budget / row_bytes;
  }
  return s;
}

Result<std::optional<RowChunkView>> RowStream::Next() {
  if (sent_first_ && next_ >= end_) return std::optional<RowChunkView>();
  const store::Table& t = entry_->table();
  const std::uint64_t br = std::max<std::uint64_t>(t.block_rows(), 1);
  const std::uint64_t pos = next_;
  std::uint64_t stop;
  if (aligned_) {
    stop = std::min(end_, (pos / br) * br + chunk_rows_);
  } else {
    stop = std::min({end_, pos + chunk_rows_, (pos / br + 1) * br});
  }
  RowChunkView c;
  c.entry = entry_;
  c.first_row = pos;
  c.row_count = stop - pos;
  c.content_id = entry_->content_id();
  c.first = !sent_first_;
  if (c.first) c.chunk_rows = chunk_rows_;
  EMBSTORE_RETURN_NOT_OK(entry_->CheckIntact());
  EMBSTORE_ASSIGN_OR_RETURN(c.payload, t.RowBytes(pos, stop));
  if (stop > pos) {
    c.first_block = pos / br;
    const std::uint64_t last_block = (stop - 1) / br;
    c.block_checksums.reserve(last_block - c.first_block + 1);
    for (std::uint64_t b = c.first_block; b <= last_block; ++b) {
      c.block_checksums.push_back(t.BlockChecksum(b));
    }
    // A block is "cut" when the stream's range starts or ends inside it: the client never gets
    // all of it, so the stored checksum cannot verify it and the chunk carries its own. Blocks
    // the stream sends entirely are verified against the stored sums, also when (sub-block
    // mode) they arrive in several consecutive chunks; the server reads no payload for them.
    const bool cuts_first = c.first_block * br < begin_;
    const bool cuts_last = std::min(t.rows(), (last_block + 1) * br) > end_;
    if (cuts_first || cuts_last) {
      c.payload_checksum = store::Checksum64(c.payload);
      // Hashing read the pages: a fault absorbed meanwhile means the sum is over zeros.
      EMBSTORE_RETURN_NOT_OK(entry_->CheckIntact());
    }
  } else {
    c.first_block = pos / br;
  }
  // Keep the kernel reading ahead of the I/O threads, in steps of half the window.
  const std::uint64_t row_bytes = std::max<std::uint64_t>(t.row_bytes(), 1);
  const std::uint64_t ahead_rows = readahead_bytes_ / row_bytes;
  if (ahead_rows > 0 && advised_until_ < std::min(end_, stop + ahead_rows / 2)) {
    const std::uint64_t from = std::max(advised_until_, stop);
    const std::uint64_t to = std::min(end_, stop + ahead_rows);
    if (from < to) {
      auto ahead = t.RowBytes(from, to);
      if (ahead.ok()) AdviseWillNeed(*ahead);
    }
    advised_until_ = to;
  }
  next_ = stop;
  sent_first_ = true;
  return std::optional<RowChunkView>(std::move(c));
}

Result<LookupReply> Service::Lookup(const v1::LookupRequest& r) const {
  std::optional<std::uint64_t> expected;
  if (r.has_expected_content_id()) expected = r.expected_content_id();
  EMBSTORE_ASSIGN_OR_RETURN(auto entry, Resolve(r.table(), expected));
  const store::Table& t = entry->table();
  if (r.selector_case() == v1::LookupRequest::SELECTOR_NOT_SET) {
    return Status::InvalidArgument("lookup in " + Quote(r.table()) +
                                   " names neither rows nor keys");
  }
  const bool by_key = r.selector_case() == v1::LookupRequest::kKeys;
  const std::uint64_t n = by_key ? r.keys().keys_size() : r.rows().ids_size();
  if (n > options_.max_lookup_batch) {
    return Status::ResourceExhausted(
        "lookup of " + std::to_string(n) + (by_key ? " keys" : " rows") + " in " +
        Quote(r.table()) + " exceeds the batch limit of " +
        std::to_string(options_.max_lookup_batch) + "; split the request");
  }
  if (by_key && !t.has_keys()) {
    return Status::FailedPrecondition(Quote(r.table()) + " has no keys; look rows up by id");
  }
  LookupReply reply;
  v1::LookupResponse& out = reply.fields;
  out.set_content_id(entry->content_id());
  out.set_dim(t.dim());
  out.set_dtype(ToProto(t.dtype()));
  std::vector<std::uint64_t> rows;
  rows.reserve(n);
  if (by_key) {
    // The key index and key bytes are checked once per loaded table, before the first lookup.
    EMBSTORE_RETURN_NOT_OK(t.VerifyKeys().WithContext(Quote(r.table())));
    for (int i = 0; i < r.keys().keys_size(); ++i) {
      EMBSTORE_ASSIGN_OR_RETURN(auto row, t.FindKey(r.keys().keys(i)));
      if (row.has_value()) {
        rows.push_back(*row);
      } else {
        out.add_missing(static_cast<std::uint32_t>(i));
      }
    }
  } else {
    for (int i = 0; i < r.rows().ids_size(); ++i) {
      const std::uint64_t id = r.rows().ids(i);
      if (id >= t.rows()) {
        return Status::OutOfRange("row id " + std::to_string(id) + " (item " + std::to_string(i) +
                                  " of the lookup) is past the end of " + Quote(r.table()) +
                                  ", which has " + std::to_string(t.rows()) + " rows");
      }
      rows.push_back(id);
    }
  }
  const std::uint64_t bytes = rows.size() * t.row_bytes();
  if (bytes > options_.max_lookup_bytes) {
    return Status::ResourceExhausted(
        "lookup of " + std::to_string(rows.size()) + " rows in " + Quote(r.table()) + " needs " +
        std::to_string(bytes) + " bytes, more than the reply limit of " +
        std::to_string(options_.max_lookup_bytes) + " bytes; split the request");
  }
  // Not zeroed first: every byte is written by the gather below.
  std::shared_ptr<std::byte[]> data(new std::byte[std::max<std::uint64_t>(bytes, 1)]);
  // Every row's checksum block is verified (once per loaded table) before the row is copied: a
  // lookup never returns a row from a block that fails its checksum.
  store::CopyOptions copy;
  copy.verify = true;
  EMBSTORE_RETURN_NOT_OK(t.GatherRows(rows, std::span<std::byte>(data.get(), bytes), copy));
  EMBSTORE_RETURN_NOT_OK(entry->CheckIntact());  // the copies may have read absorbed faults
  out.mutable_rows()->Reserve(static_cast<int>(rows.size()));
  out.mutable_row_checksums()->Reserve(static_cast<int>(rows.size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out.add_rows(rows[i]);
    out.add_row_checksums(store::Checksum64({data.get() + i * t.row_bytes(), t.row_bytes()}));
  }
  reply.data = std::move(data);
  reply.data_size = bytes;
  return reply;
}

namespace {

constexpr std::uint64_t kMaxHashesPerReply = 262144;  // 2 MiB of hashes, rows' or groups'
constexpr std::uint64_t kMaxGroupRows = 65536;

// The row hashes of the groups `r.groups()` of `group_rows` rows, one group after another.
Status GroupsRowHashes(const store::Table& t, const v1::RowHashesRequest& r,
                       std::uint64_t group_rows, v1::RowHashesResponse* out) {
  const std::uint64_t groups = (t.rows() + group_rows - 1) / group_rows;
  std::uint64_t total = 0;
  for (int i = 0; i < r.groups_size(); ++i) {
    const std::uint64_t g = r.groups(i);
    if (g >= groups || (i > 0 && g <= r.groups(i - 1))) {
      return Status::InvalidArgument(
          "row hashes of groups of " + Quote(r.table()) + ": group " + std::to_string(g) +
          " (item " + std::to_string(i) + ") is " +
          (g >= groups ? "past the table's " + std::to_string(groups) + " groups of " +
                             std::to_string(group_rows) + " rows"
                       : std::string("not above the group before it (groups must ascend)")));
    }
    total += store::RowGroupOf(g, group_rows, t.rows()).size();
  }
  if (total > kMaxHashesPerReply) {
    return Status::InvalidArgument("row hashes of " + std::to_string(r.groups_size()) +
                                   " groups of " + Quote(r.table()) + " are " +
                                   std::to_string(total) + " rows, more than the reply limit of " +
                                   std::to_string(kMaxHashesPerReply) + "; split the request");
  }
  std::string* bytes = out->mutable_row_hashes();
  bytes->resize(total * 8);
  std::uint64_t at = 0;
  for (const std::uint64_t g : r.groups()) {
    const store::RowGroup rows = store::RowGroupOf(g, group_rows, t.rows());
    EMBSTORE_RETURN_NOT_OK(
        t.RowHashes(rows.first, rows.last,
                    std::span<std::uint64_t>(reinterpret_cast<std::uint64_t*>(bytes->data()) + at,
                                             rows.size()))
            .WithContext(Quote(r.table())));
    at += rows.size();
  }
  return Status::OK();
}

}  // namespace

Result<v1::RowHashesResponse> Service::RowHashes(const v1::RowHashesRequest& r) const {
  std::optional<std::uint64_t> expected;
  if (r.has_expected_content_id()) expected = r.expected_content_id();
  EMBSTORE_ASSIGN_OR_RETURN(auto entry, Resolve(r.table(), expected));
  const store::Table& t = entry->table();
  const std::uint64_t group_rows = r.group_rows() < 2 ? 1 : r.group_rows();
  if (group_rows > kMaxGroupRows) {
    return Status::InvalidArgument("row hashes of " + Quote(r.table()) + " in groups of " +
                                   std::to_string(group_rows) + " rows: at most " +
                                   std::to_string(kMaxGroupRows) + " rows a group");
  }
  if (r.groups_size() > 0 && group_rows == 1) {
    return Status::InvalidArgument("row hashes of groups of " + Quote(r.table()) +
                                   " need group_rows of 2 or more");
  }
  v1::RowHashesResponse out;
  out.set_content_id(entry->content_id());
  out.set_stored(t.has_row_hashes());
  // Stored hashes are checked against the rows, and the rows against their blocks, once per
  // loaded table (computed ones come from verified blocks): what is sent is vouched for.
  if (t.has_row_hashes()) {
    EMBSTORE_RETURN_NOT_OK(t.VerifyRowHashesOnce().WithContext(Quote(r.table())));
  }
  out.set_verified(true);
  if (r.groups_size() > 0) {
    EMBSTORE_RETURN_NOT_OK(GroupsRowHashes(t, r, group_rows, &out));
    EMBSTORE_RETURN_NOT_OK(entry->CheckIntact());
    return out;
  }
  const std::uint64_t end = r.has_end_row() ? r.end_row() : t.rows();
  if (r.begin_row() > end || end > t.rows()) {
    return Status::OutOfRange("row hashes of rows [" + std::to_string(r.begin_row()) + ", " +
                              std::to_string(end) + ") of " + Quote(r.table()) + ", which has " +
                              std::to_string(t.rows()) + " rows");
  }
  if (r.begin_row() % group_rows != 0 || (end % group_rows != 0 && end != t.rows())) {
    return Status::InvalidArgument(
        "row hashes of rows [" + std::to_string(r.begin_row()) + ", " + std::to_string(end) +
        ") of " + Quote(r.table()) + " in groups of " + std::to_string(group_rows) +
        " rows: the range must begin and end where groups do (or at the table's end)");
  }
  // The reply's rows: whole groups, at most kMaxHashesPerReply hashes of either kind.
  const std::uint64_t n =
      std::min(end - r.begin_row(), kMaxHashesPerReply * group_rows);
  out.set_first_row(r.begin_row());
  if (group_rows == 1) {
    std::string* bytes = out.mutable_row_hashes();
    bytes->resize(n * 8);
    EMBSTORE_RETURN_NOT_OK(
        t.RowHashes(r.begin_row(), r.begin_row() + n,
                    std::span<std::uint64_t>(reinterpret_cast<std::uint64_t*>(bytes->data()), n))
            .WithContext(Quote(r.table())));
  } else {
    // Groups begin at begin_row, a multiple of group_rows (TableEntry::GroupHashes keeps them
    // with the loaded version).
    const std::uint64_t groups = (n + group_rows - 1) / group_rows;
    std::string* bytes = out.mutable_group_hashes();
    bytes->resize(groups * 8);
    EMBSTORE_RETURN_NOT_OK(
        entry
            ->GroupHashes(group_rows, r.begin_row() / group_rows,
                          std::span<std::uint64_t>(
                              reinterpret_cast<std::uint64_t*>(bytes->data()), groups))
            .WithContext(Quote(r.table())));
  }
  EMBSTORE_RETURN_NOT_OK(entry->CheckIntact());
  if (n > 0) {
    const std::uint64_t first = r.begin_row() / t.block_rows();
    const std::uint64_t last = (r.begin_row() + n - 1) / t.block_rows();
    out.set_first_block(first);
    for (std::uint64_t b = first; b <= last; ++b) out.add_block_checksums(t.BlockChecksum(b));
  }
  return out;
}

Result<std::unique_ptr<KeyStream>> Service::StreamKeys(const v1::StreamKeysRequest& r) const {
  std::optional<std::uint64_t> expected;
  if (r.has_expected_content_id()) expected = r.expected_content_id();
  EMBSTORE_ASSIGN_OR_RETURN(auto entry, Resolve(r.table(), expected));
  const store::Table& t = entry->table();
  if (!t.has_keys()) return Status::FailedPrecondition(Quote(r.table()) + " has no keys");
  // Keys leave the server only once they passed their checksums (once per loaded table).
  EMBSTORE_RETURN_NOT_OK(t.VerifyKeys().WithContext(Quote(r.table())));
  const std::uint64_t end = r.has_end_row() ? r.end_row() : t.rows();
  EMBSTORE_RETURN_NOT_OK(CheckRange(r.table(), t.rows(), r.begin_row(), end));
  std::uint64_t budget = r.chunk_bytes() == 0 ? options_.default_key_chunk_bytes : r.chunk_bytes();
  if (budget > options_.max_chunk_bytes) {
    return Status::InvalidArgument("chunk_bytes " + std::to_string(budget) +
                                   " is more than the server's limit of " +
                                   std::to_string(options_.max_chunk_bytes) + " bytes");
  }
  auto s = std::make_unique<KeyStream>();
  s->entry_ = entry;
  s->next_ = r.begin_row();
  s->end_ = end;
  s->chunk_bytes_ = budget;
  return s;
}

Result<std::optional<v1::KeyChunk>> KeyStream::Next() {
  if (sent_any_ && next_ >= end_) return std::optional<v1::KeyChunk>();
  const store::Table& t = entry_->table();
  EMBSTORE_RETURN_NOT_OK(entry_->CheckIntact());
  v1::KeyChunk c;
  c.set_first_row(next_);
  c.set_content_id(entry_->content_id());
  std::uint64_t used = 0;
  std::string* data = c.mutable_key_data();
  while (next_ < end_) {
    std::string_view key = t.Key(next_);
    // Each key costs its bytes plus at most 3 bytes of packed length (keys are < 64 KiB).
    const std::uint64_t cost = key.size() + 3;
    if (c.key_lengths_size() > 0 && used + cost > chunk_bytes_) break;
    data->append(key.data(), key.size());
    c.add_key_lengths(static_cast<std::uint32_t>(key.size()));
    used += cost;
    ++next_;
  }
  EMBSTORE_RETURN_NOT_OK(entry_->CheckIntact());
  sent_any_ = true;
  return std::optional<v1::KeyChunk>(std::move(c));
}

}  // namespace embstore::server
