#include "table_output.h"

#include <algorithm>
#include <charconv>
#include <string_view>

#include "embstore/common/atomic_file.h"
#include "embstore/store/format.h"
#include "embstore/store/npy.h"
#include "embstore/store/writer.h"

namespace embstore::cli {
namespace {

class NpyOutput final : public TableOutput {
 public:
  NpyOutput(std::unique_ptr<AtomicFile> f, std::uint64_t data_offset)
      : file_(std::move(f)), data_offset_(data_offset) {}
  Status WriteAt(std::uint64_t offset,
                 std::span<const std::span<const std::byte>> pieces) override {
    return file_->WriteAt(data_offset_ + offset, pieces);
  }
  Status Finish(client::RowSource&, std::uint64_t, std::uint64_t) override {
    return file_->Commit();
  }

 private:
  std::unique_ptr<AtomicFile> file_;
  std::uint64_t data_offset_;
};

class TableFileOutput final : public TableOutput {
 public:
  TableFileOutput(std::unique_ptr<store::TableWriter> w, bool keys)
      : writer_(std::move(w)), keys_(keys) {}
  bool ordered() const override { return true; }
  Status WriteAt(std::uint64_t offset,
                 std::span<const std::span<const std::byte>> pieces) override {
    if (offset != written_) {
      return Status::Internal("rows for output offset " + std::to_string(offset) +
                              " arrived where " + std::to_string(written_) + " was due");
    }
    for (auto piece : pieces) {
      EMBSTORE_RETURN_NOT_OK(writer_->AppendRows(piece));
      written_ += piece.size();
    }
    return Status::OK();
  }
  Status Finish(client::RowSource& src, std::uint64_t begin, std::uint64_t end) override {
    if (keys_) {
      EMBSTORE_RETURN_NOT_OK(ForEachKey(src, begin, end, [&](std::uint64_t, const std::string& k) {
        return writer_->AppendKey(k);
      }));
    }
    return writer_->Finish();
  }

 private:
  std::unique_ptr<store::TableWriter> writer_;
  bool keys_;
  std::uint64_t written_ = 0;
};

}  // namespace

Status ForEachKey(client::RowSource& src, std::uint64_t begin, std::uint64_t end,
                  const std::function<Status(std::uint64_t row, const std::string& key)>& fn) {
  constexpr std::uint64_t kSlice = 1 << 16;
  for (std::uint64_t r = begin; r < end; r += kSlice) {
    EMBSTORE_ASSIGN_OR_RETURN(auto keys, src.Keys(r, std::min(end, r + kSlice)));
    for (std::size_t i = 0; i < keys.size(); ++i) EMBSTORE_RETURN_NOT_OK(fn(r + i, keys[i]));
  }
  return Status::OK();
}

Status ParseRows(const std::string& spec, std::uint64_t rows, std::uint64_t* begin,
                 std::uint64_t* end) {
  *begin = 0;
  *end = rows;
  if (spec.empty()) return Status::OK();
  auto colon = spec.find(':');
  auto bad = [&] {
    return Status::InvalidArgument("--rows '" + spec + "' is not A:B, A: or :B with row numbers");
  };
  if (colon == std::string::npos) return bad();
  auto num = [&](std::string_view s, std::uint64_t* v) {
    if (s.empty()) return true;
    auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  std::string_view a(spec.data(), colon), b(spec.data() + colon + 1, spec.size() - colon - 1);
  if (!num(a, begin) || !num(b, end)) return bad();
  if (*begin > *end || *end > rows) {
    return Status::OutOfRange("--rows " + spec + " is outside the table's " + std::to_string(rows) +
                              " rows");
  }
  return Status::OK();
}

Result<std::unique_ptr<TableOutput>> CreateNpyOutput(const std::string& path, bool overwrite,
                                                     bool f32, std::uint64_t rows,
                                                     std::uint64_t dim) {
  EMBSTORE_ASSIGN_OR_RETURN(auto file, AtomicFile::Create(path, overwrite));
  const std::string header = store::NpyHeader(f32 ? "<f4" : "<f2", rows, dim);
  EMBSTORE_RETURN_NOT_OK(file->Append(header));
  return std::unique_ptr<TableOutput>(new NpyOutput(std::move(file), header.size()));
}

Result<std::unique_ptr<TableOutput>> CreateTableOutput(const std::string& path, bool overwrite,
                                                       const client::TableDesc& d, bool keys,
                                                       const std::string& creator) {
  store::WriterOptions wo;
  wo.dtype = d.dtype;
  wo.dim = d.dim;
  wo.block_rows = d.block_rows;
  wo.overwrite = overwrite;
  wo.with_keys = d.has_keys && keys;
  wo.expected_rows = d.rows;  // space reserved up front: a full disk fails before the transfer
  wo.metadata = d.metadata;
  wo.creator = creator;
  EMBSTORE_ASSIGN_OR_RETURN(auto w, store::TableWriter::Create(path, wo));
  return std::unique_ptr<TableOutput>(new TableFileOutput(std::move(w), wo.with_keys));
}

}  // namespace embstore::cli
