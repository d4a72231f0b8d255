// RowSource over a local table file (row_source.h).
#include <algorithm>
#include <cstring>

#include "embstore/client/row_source.h"
#include "embstore/store/dtype.h"
#include "embstore/store/format.h"
#include "embstore/store/names.h"
#include "file_reader.h"
#include "sources.h"

namespace embstore::client {
namespace {

class FileSource final : public RowSource {
 public:
  explicit FileSource(std::unique_ptr<internal::FileReader> reader) : reader_(std::move(reader)) {
    desc_ = store::DescribeTable(reader_->table(), store::TableNameOfFile(reader_->path()));
    desc_.file = reader_->file();
  }

  std::string_view kind() const override { return "file"; }
  const std::string& location() const override { return reader_->path(); }
  const store::Table* local_table() const override { return &reader_->table(); }

  Result<LoadStats> CopyRows(std::uint64_t begin, std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options) override {
    return reader_->CopyRows(begin, end, out, options, desc_.name);
  }

  Result<KeyCopyResult> CopyKeys(std::span<const std::string> keys, std::span<std::byte> out,
                                 const ReadOptions& options) override {
    return internal::CopyKeysFromTable(reader_->table(), desc_.name, keys, out, options);
  }

  Result<RowDigest> Digest() override { return internal::DigestOfTable(reader_->table()); }

  Result<LoadStats> CopyRowIds(std::span<const std::uint64_t> ids, std::span<std::byte> out,
                               const ReadOptions&) override {
    return internal::CopyRowIdsFromTable(reader_->table(), desc_, ids, out);
  }

  Result<std::vector<std::string>> Keys(std::uint64_t begin, std::uint64_t end) override {
    return internal::KeysFromTable(reader_->table(), desc_.name, begin, end);
  }

 private:
  std::unique_ptr<internal::FileReader> reader_;
};

}  // namespace

namespace internal {

Status CheckKeyLookup(const std::string& name, bool has_keys, std::uint64_t per_row,
                      std::size_t keys, std::size_t out_bytes) {
  if (!has_keys) return Status::FailedPrecondition("table '" + name + "' has no keys");
  if (out_bytes != keys * per_row) {
    return Status::InvalidArgument("buffer for " + std::to_string(keys) + " keys of table '" +
                                   name + "' holds " + std::to_string(out_bytes) +
                                   " bytes, they need " + std::to_string(keys * per_row));
  }
  return Status::OK();
}

Result<KeyCopyResult> CopyKeysFromTable(const store::Table& t, const std::string& name,
                                        std::span<const std::string> keys,
                                        std::span<std::byte> out, const ReadOptions& options) {
  const std::uint64_t per_row = options.to_f32 ? t.dim() * 4 : t.row_bytes();
  EMBSTORE_RETURN_NOT_OK(CheckKeyLookup(name, t.has_keys(), per_row, keys.size(), out.size()));
  // Keys are checked once per mapping before the first lookup; each row's block before its row
  // is copied (store::Table::GatherRows), so no row comes from a block that fails its checksum.
  if (options.verify) EMBSTORE_RETURN_NOT_OK(t.VerifyKeys());
  KeyCopyResult result;
  store::CopyOptions copy;
  copy.to_f32 = options.to_f32;
  copy.verify = options.verify;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (options.cancel && options.cancel->cancelled()) {
      return Status::Cancelled("lookup in table '" + name + "' cancelled");
    }
    EMBSTORE_ASSIGN_OR_RETURN(auto row, t.FindKey(keys[i]));
    if (!row) {
      result.missing.push_back(static_cast<std::uint32_t>(i));
      continue;
    }
    const std::uint64_t r = *row;
    EMBSTORE_RETURN_NOT_OK(
        t.GatherRows(std::span<const std::uint64_t>(&r, 1), out.subspan(i * per_row, per_row),
                     copy));
  }
  EMBSTORE_RETURN_NOT_OK(t.CheckIntact());
  return result;
}

Result<LoadStats> CopyRowIdsFromTable(const store::Table& t, const TableDesc& desc,
                                      std::span<const std::uint64_t> ids,
                                      std::span<std::byte> out) {
  if (out.size() != ids.size() * t.row_bytes()) {
    return Status::InvalidArgument("buffer for " + std::to_string(ids.size()) + " rows of table '" +
                                   desc.name + "' holds " + std::to_string(out.size()) + " bytes");
  }
  store::CopyOptions copy;
  copy.verify = true;
  EMBSTORE_RETURN_NOT_OK(t.GatherRows(ids, out, copy));
  LoadStats s;
  s.rows = ids.size();
  s.bytes = out.size();
  s.local = true;
  s.content_id = desc.content_id;
  return s;
}

Result<RowDigest> DigestOfTable(const store::Table& t) {
  RowDigest d;
  d.stored = t.has_row_hashes();
  // Computed from verified rows, or stored with a checksum that matches.
  EMBSTORE_ASSIGN_OR_RETURN(const bool checked, t.CheckRowHashesChecksum());
  d.verified = !d.stored || checked;
  d.row_hashes.resize(t.rows());
  EMBSTORE_RETURN_NOT_OK(t.RowHashes(0, t.rows(), d.row_hashes));
  d.block_checksums.resize(t.num_blocks());
  for (std::uint64_t b = 0; b < t.num_blocks(); ++b) d.block_checksums[b] = t.BlockChecksum(b);
  return d;
}

Result<std::vector<std::string>> KeysFromTable(const store::Table& t, const std::string& name,
                                               std::uint64_t begin, std::uint64_t end) {
  if (!t.has_keys()) return Status::FailedPrecondition("table '" + name + "' has no keys");
  EMBSTORE_RETURN_NOT_OK(t.RowBytes(begin, end).status());
  EMBSTORE_RETURN_NOT_OK(t.VerifyKeys());
  std::vector<std::string> out;
  out.reserve(end - begin);
  for (std::uint64_t r = begin; r < end; ++r) out.emplace_back(t.Key(r));
  EMBSTORE_RETURN_NOT_OK(t.CheckIntact());
  return out;
}

}  // namespace internal

namespace internal {

Result<std::uint64_t> RowRangeBytes(const TableDesc& desc, std::uint64_t begin, std::uint64_t end,
                                    bool to_f32) {
  if (begin > end) {
    return Status::InvalidArgument("row range [" + std::to_string(begin) + ", " +
                                   std::to_string(end) + ") of table '" + desc.name +
                                   "' begins after it ends");
  }
  if (end > desc.rows) {
    return Status::OutOfRange("row range [" + std::to_string(begin) + ", " + std::to_string(end) +
                              ") is outside table '" + desc.name + "' of " +
                              std::to_string(desc.rows) + " rows");
  }
  return (end - begin) * (to_f32 ? desc.dim * 4 : desc.row_bytes);
}

}  // namespace internal

Result<std::uint64_t> RowSource::OutputBytes(std::uint64_t begin, std::uint64_t end,
                                             bool to_f32) const {
  return internal::RowRangeBytes(desc_, begin, end, to_f32);
}

Result<std::unique_ptr<RowSource>> OpenFileSource(const std::string& path) {
  EMBSTORE_ASSIGN_OR_RETURN(auto reader, internal::FileReader::Open(path));
  return std::unique_ptr<RowSource>(new FileSource(std::move(reader)));
}

}  // namespace embstore::client
