#include "embstore/store/table.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <boost/interprocess/file_mapping.hpp>
#include <boost/interprocess/mapped_region.hpp>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "embstore/store/table_desc.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "embstore/store/checksum.h"
#include "embstore/store/format.h"
#include "header.h"

namespace embstore::store {

namespace bip = boost::interprocess;

struct Table::Mapping {
  bip::file_mapping file;
  bip::mapped_region region;
};

namespace {

std::uint64_t LoadU64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);  // little-endian host, unaligned-safe
  return v;
}

// a * b, or nullopt on overflow.
std::optional<std::uint64_t> Mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::string Range(std::uint64_t b, std::uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

}  // namespace

Table::~Table() = default;

Result<std::shared_ptr<const Table>> Table::Open(const std::string& path,
                                                 const OpenOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno("open table '" + path + "'", errno);
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument("'" + path + "' is not a regular file");
  if (st.st_size < 8) {
    return Status::Corruption("'" + path + "': file is " + std::to_string(st.st_size) +
                              " bytes, too short for a table header (at least 8)");
  }
  std::shared_ptr<Table> t(new Table());
  t->path_ = path;
  try {
    auto m = std::make_unique<Mapping>();
    m->file = bip::file_mapping(path.c_str(), bip::read_only);
    m->region = bip::mapped_region(m->file, bip::read_only);
    t->mapping_ = std::move(m);
  } catch (const bip::interprocess_exception& e) {
    return Status::IOError("map table '" + path + "': " + e.what());
  }
  t->base_ = static_cast<const std::byte*>(t->mapping_->region.get_address());
  t->file_size_ = t->mapping_->region.get_size();
  EMBSTORE_ASSIGN_OR_RETURN(
      t->guard_, MappingGuard::Register({t->base_, static_cast<std::size_t>(t->file_size_)}));
  EMBSTORE_RETURN_NOT_OK(t->Parse());
  // The file may have shrunk between stat() and the reads of Parse().
  EMBSTORE_RETURN_NOT_OK(t->CheckIntact());
  if (options.verify) EMBSTORE_RETURN_NOT_OK(t->VerifyAll());
  return std::shared_ptr<const Table>(std::move(t));
}

Status Table::Parse() {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("'" + path_ + "': " + what);
  };
  const std::uint64_t header_len = LoadU64(base_);
  if (header_len > kMaxHeaderBytes) {
    return bad("header length " + std::to_string(header_len) + " is larger than the limit of " +
               std::to_string(kMaxHeaderBytes) + " bytes (not a table file?)");
  }
  if (header_len > file_size_ - 8) {
    return bad("header length " + std::to_string(header_len) + " runs past the end of the " +
               std::to_string(file_size_) + "-byte file (truncated?)");
  }
  std::string_view json(reinterpret_cast<const char*>(base_ + 8), header_len);
  if (json.empty() || json.front() != '{') return bad("header does not start with '{'");
  // Only spaces may pad the header after its closing '}' (docs/FORMAT.md, "Layout"); the JSON
  // parser would stop at a NUL and accept anything after it.
  const std::size_t last = json.find_last_not_of(' ');
  if (json[last] != '}') {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned char>(json[last]));
    return bad("header padding byte " + std::string(byte) + " at file offset " +
               std::to_string(8 + last) +
               "; the JSON header must end with '}' followed only by spaces (0x20)");
  }
  if (const std::size_t nul = json.find('\0'); nul != std::string_view::npos) {
    return bad("NUL byte in the JSON header at file offset " + std::to_string(8 + nul));
  }
  json = json.substr(0, last + 1);
  EMBSTORE_ASSIGN_OR_RETURN(HeaderContent h, ParseHeader(json, path_));

  for (auto& [k, v] : h.metadata) metadata_[k] = v;
  auto meta = [&](std::string_view key) -> const std::string* {
    auto it = metadata_.find(std::string(key));
    return it == metadata_.end() ? nullptr : &it->second;
  };
  const std::string* format = meta(kMetaFormat);
  if (!format || *format != kFormatName) {
    return bad("not an embstore table: __metadata__ lacks \"" + std::string(kMetaFormat) +
               "\": \"" + std::string(kFormatName) + "\" (a plain safetensors file?)");
  }
  const std::string* version = meta(kMetaVersion);
  int v = 0;
  if (!version ||
      std::from_chars(version->data(), version->data() + version->size(), v).ec != std::errc() ||
      v < 1) {
    return bad("missing or invalid " + std::string(kMetaVersion));
  }
  if (v > kFormatVersion) {
    return Status::Unimplemented("'" + path_ + "': table format version " + std::to_string(v) +
                                 " is newer than this embstore reads (" +
                                 std::to_string(kFormatVersion) + "); upgrade embstore");
  }
  version_ = v;
  const std::string* checksum = meta(kMetaChecksum);
  if (!checksum || *checksum != kChecksumName) {
    return bad("unsupported checksum '" + (checksum ? *checksum : std::string("(none)")) +
               "', expected '" + std::string(kChecksumName) + "'");
  }
  const std::string* br = meta(kMetaBlockRows);
  if (!br || std::from_chars(br->data(), br->data() + br->size(), block_rows_).ec != std::errc() ||
      block_rows_ == 0) {
    return bad("missing or invalid " + std::string(kMetaBlockRows));
  }

  data_offset_ = 8 + header_len;
  if (data_offset_ % kDataAlignment != 0) {
    return bad("matrix starts at file offset " + std::to_string(data_offset_) +
               ", which is not a multiple of " + std::to_string(kDataAlignment));
  }
  const std::uint64_t buffer_size = file_size_ - data_offset_;

  // The data buffer must be covered exactly by the tensors, in order, with no holes (safetensors'
  // rule), and hold exactly the tensors of the profile.
  std::uint64_t expect = 0;
  for (const auto& t : h.tensors) {
    if (t.begin != expect) {
      return bad("tensor '" + t.name + "' starts at byte " + std::to_string(t.begin) +
                 " of the data buffer, expected " + std::to_string(expect) + " (overlap or hole)");
    }
    expect = t.end;
  }
  if (expect != buffer_size) {
    return bad("tensors cover " + std::to_string(expect) + " bytes of data but the file has " +
               std::to_string(buffer_size) + " after the header (truncated or padded file)");
  }
  auto find = [&](std::string_view name) -> const TensorEntry* {
    for (const auto& t : h.tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  for (const auto& t : h.tensors) {
    const bool known = t.name == kTensorEmbedding || t.name == kTensorChecksums ||
                       t.name == kTensorKeyOffsets || t.name == kTensorKeyIndex ||
                       t.name == kTensorKeyBytes ||
                       (t.name == kTensorKeyChecksums && v >= kFirstVersionWithKeyChecksums) ||
                       (t.name == kTensorRowHashes && v >= kFirstVersionWithRowHashes);
    if (!known) {
      const bool later = t.name == kTensorKeyChecksums || t.name == kTensorRowHashes;
      return bad("unexpected tensor '" + t.name + "'" +
                 (later ? " in a version " + std::to_string(v) + " table" : std::string()));
    }
  }
  // Checks that tensor `t` has dtype `dtype`, a shape of `shape` and spans exactly its bytes.
  auto check = [&](const TensorEntry& t, std::string_view dtype, std::size_t esize,
                   std::vector<std::uint64_t> shape) -> Status {
    if (t.dtype != dtype) {
      return bad("tensor '" + t.name + "' has dtype " + t.dtype + ", expected " +
                 std::string(dtype));
    }
    if (t.shape != shape) {
      std::string want, got;
      for (auto d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      for (auto d : t.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      return bad("tensor '" + t.name + "' has shape [" + got + "], expected [" + want + "]");
    }
    std::optional<std::uint64_t> bytes = esize;
    for (auto d : shape) bytes = bytes ? Mul(*bytes, d) : std::nullopt;
    if (!bytes || t.end - t.begin != *bytes) {
      return bad("tensor '" + t.name + "' spans bytes " + Range(t.begin, t.end) +
                 " but its shape needs " + (bytes ? std::to_string(*bytes) : "more than 2^64"));
    }
    return Status::OK();
  };

  const TensorEntry* emb = find(kTensorEmbedding);
  if (!emb) return bad("no '" + std::string(kTensorEmbedding) + "' tensor");
  if (emb->begin != 0) return bad("the embedding matrix is not the first tensor");
  auto dt = ParseDType(emb->dtype);
  if (!dt || emb->dtype != DTypeName(*dt)) {
    return bad("embedding dtype '" + emb->dtype + "' is not one of F32, F16, BF16");
  }
  dtype_ = *dt;
  if (emb->shape.size() != 2) {
    return bad("embedding has " + std::to_string(emb->shape.size()) +
               " dimensions, expected 2 ([rows, dim])");
  }
  rows_ = emb->shape[0];
  dim_ = emb->shape[1];
  // Every size derived from the header comes from ComputeGeometry, with overflow checks.
  auto geometry = ComputeGeometry(rows_, dim_, DTypeSize(dtype_), block_rows_, "embedding");
  if (!geometry.ok()) return bad(geometry.status().message());
  EMBSTORE_RETURN_NOT_OK(check(*emb, emb->dtype, DTypeSize(dtype_), {rows_, dim_}));
  row_bytes_ = static_cast<std::size_t>(geometry->row_bytes);
  block_bytes_ = geometry->block_bytes;

  const TensorEntry* sums = find(kTensorChecksums);
  if (!sums) return bad("no '" + std::string(kTensorChecksums) + "' tensor");
  num_blocks_ = geometry->num_blocks;
  EMBSTORE_RETURN_NOT_OK(check(*sums, "U64", 8, {num_blocks_}));
  checksums_ = base_ + data_offset_ + sums->begin;
  if (const TensorEntry* hashes = find(kTensorRowHashes)) {
    EMBSTORE_RETURN_NOT_OK(check(*hashes, "U64", 8, {rows_}));
    row_hashes_ = base_ + data_offset_ + hashes->begin;
  }

  const TensorEntry* koff = find(kTensorKeyOffsets);
  const TensorEntry* kidx = find(kTensorKeyIndex);
  const TensorEntry* kbytes = find(kTensorKeyBytes);
  int nkeys = (koff != nullptr) + (kidx != nullptr) + (kbytes != nullptr);
  if (nkeys == 0 && find(kTensorKeyChecksums)) {
    return bad("'" + std::string(kTensorKeyChecksums) + "' without keys");
  }
  if (nkeys != 0 && nkeys != 3) {
    return bad("keys need all of keys.offsets, keys.index and keys.bytes; found only some");
  }
  if (nkeys == 3) {
    if (rows_ == std::numeric_limits<std::uint64_t>::max()) return bad("too many rows");
    EMBSTORE_RETURN_NOT_OK(check(*koff, "U64", 8, {rows_ + 1}));
    if (kidx->shape.size() != 1) return bad("keys.index must have one dimension");
    key_slots_ = kidx->shape[0];
    if (!std::has_single_bit(key_slots_) || key_slots_ <= rows_) {
      return bad("keys.index has " + std::to_string(key_slots_) +
                 " slots; expected a power of two larger than the row count " +
                 std::to_string(rows_));
    }
    EMBSTORE_RETURN_NOT_OK(check(*kidx, "U64", 8, {key_slots_}));
    if (kbytes->shape.size() != 1) return bad("keys.bytes must have one dimension");
    key_bytes_size_ = kbytes->shape[0];
    EMBSTORE_RETURN_NOT_OK(check(*kbytes, "U8", 1, {key_bytes_size_}));
    key_offsets_ = base_ + data_offset_ + koff->begin;
    key_index_ = base_ + data_offset_ + kidx->begin;
    key_data_ = reinterpret_cast<const char*>(base_ + data_offset_ + kbytes->begin);
    const TensorEntry* ksums = find(kTensorKeyChecksums);
    if (v >= kFirstVersionWithKeyChecksums) {
      if (!ksums) {
        return bad("a version " + std::to_string(v) + " table with keys needs the '" +
                   std::string(kTensorKeyChecksums) + "' tensor");
      }
      EMBSTORE_RETURN_NOT_OK(check(*ksums, "U64", 8, {3}));
      key_checksums_ = base_ + data_offset_ + ksums->begin;
    }
    // Every key must lie inside keys.bytes, and the index may only name real rows, once each,
    // so no lookup can read out of bounds or loop forever.
    std::uint64_t prev = LoadU64(key_offsets_);
    if (prev != 0) return bad("keys.offsets[0] is " + std::to_string(prev) + ", expected 0");
    for (std::uint64_t r = 0; r < rows_; ++r) {
      std::uint64_t end = LoadU64(key_offsets_ + 8 * (r + 1));
      if (end <= prev || end - prev > kMaxKeyBytes || end > key_bytes_size_) {
        return bad("key of row " + std::to_string(r) + " spans " + Range(prev, end) +
                   ", which is empty, too long or outside the " + std::to_string(key_bytes_size_) +
                   " key bytes");
      }
      prev = end;
    }
    if (prev != key_bytes_size_) {
      return bad("keys end at byte " + std::to_string(prev) + " of " +
                 std::to_string(key_bytes_size_) + " key bytes");
    }
    std::uint64_t filled = 0;
    for (std::uint64_t s = 0; s < key_slots_; ++s) {
      std::uint64_t row = LoadU64(key_index_ + 8 * s);
      if (row == kEmptySlot) continue;
      if (row >= rows_) {
        return bad("keys.index slot " + std::to_string(s) + " names row " + std::to_string(row) +
                   " of " + std::to_string(rows_));
      }
      ++filled;
    }
    if (filled != rows_) {
      return bad("keys.index holds " + std::to_string(filled) + " rows, expected " +
                 std::to_string(rows_));
    }
    has_keys_ = true;
  }
  return Status::OK();
}

std::map<std::string, std::string> Table::user_metadata() const {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : metadata_) {
    if (k.rfind(kReservedMetaPrefix, 0) != 0) out.emplace(k, v);
  }
  return out;
}

Result<std::span<const std::byte>> Table::RowBytes(std::uint64_t begin, std::uint64_t end) const {
  if (begin > end) {
    return Status::InvalidArgument("table '" + path_ + "': row range " + Range(begin, end) +
                                   " begins after it ends");
  }
  if (end > rows_) {
    return Status::OutOfRange("table '" + path_ + "': row range " + Range(begin, end) +
                              " is outside the table's " + std::to_string(rows_) + " rows");
  }
  return std::span<const std::byte>(base_ + data_offset_ + begin * row_bytes_,
                                    (end - begin) * row_bytes_);
}

template <typename T>
Result<std::span<const T>> Table::Rows(std::uint64_t begin, std::uint64_t end) const {
  constexpr bool is_f32 = std::is_same_v<T, float>;
  if (is_f32 != (dtype_ == DType::kF32)) {
    return Status::InvalidArgument("table '" + path_ + "' holds " + std::string(DTypeName(dtype_)) +
                                   ", not " + (is_f32 ? "F32" : "a 16-bit type"));
  }
  EMBSTORE_ASSIGN_OR_RETURN(auto bytes, RowBytes(begin, end));
  return std::span<const T>(reinterpret_cast<const T*>(bytes.data()), bytes.size() / sizeof(T));
}

template Result<std::span<const float>> Table::Rows<float>(std::uint64_t, std::uint64_t) const;
template Result<std::span<const std::uint16_t>> Table::Rows<std::uint16_t>(std::uint64_t,
                                                                           std::uint64_t) const;

Status Table::ReadRowsF32(std::uint64_t begin, std::uint64_t end, std::span<float> out) const {
  EMBSTORE_ASSIGN_OR_RETURN(auto bytes, RowBytes(begin, end));
  if (out.size() != (end - begin) * dim_) {
    return Status::InvalidArgument(
        "table '" + path_ + "': output holds " + std::to_string(out.size()) + " floats, rows " +
        Range(begin, end) + " need " + std::to_string((end - begin) * dim_));
  }
  ConvertToF32(dtype_, bytes, out);
  return CheckIntact();
}

Status Table::CheckIntact() const {
  if (guard_ && guard_->poisoned()) {
    return Status::Corruption("'" + path_ +
                              "': part of the file could not be read while it was "
                              "mapped (it was truncated or rewritten in place, or the disk "
                              "failed); the data read from it is lost. Table files must be "
                              "replaced by rename, never rewritten in place");
  }
  return Status::OK();
}

int Table::fd() const { return mapping_->file.get_mapping_handle().handle; }

std::uint64_t Table::BlockChecksum(std::uint64_t block) const {
  return LoadU64(checksums_ + 8 * block);
}

std::pair<std::uint64_t, std::uint64_t> Table::BlockRange(std::uint64_t block) const {
  const std::uint64_t first = block * block_rows_;  // block < num_blocks_: no overflow
  const std::uint64_t last = rows_ - first <= block_rows_ ? rows_ : first + block_rows_;
  return {first, last};
}

Status Table::CheckBlock(std::uint64_t b, std::span<const std::byte> bytes) const {
  if (b >= num_blocks_) {
    return Status::InvalidArgument("'" + path_ + "' has " + std::to_string(num_blocks_) +
                                   " checksum blocks, not a block " + std::to_string(b));
  }
  auto [first, last] = BlockRange(b);
  if (bytes.size() != (last - first) * row_bytes_) {
    return Status::InvalidArgument("block " + std::to_string(b) + " of '" + path_ + "' is " +
                                   std::to_string((last - first) * row_bytes_) + " bytes, not " +
                                   std::to_string(bytes.size()));
  }
  std::uint64_t got = Checksum64(bytes);
  std::uint64_t want = BlockChecksum(b);
  if (got != want) {
    EMBSTORE_RETURN_NOT_OK(CheckIntact());  // zeros from a truncated file: say so instead
    char buf[96];
    std::snprintf(buf, sizeof buf, ": stored %016llx, computed %016llx",
                  static_cast<unsigned long long>(want), static_cast<unsigned long long>(got));
    return Status::Corruption("'" + path_ + "': checksum mismatch in block " + std::to_string(b) +
                              " (rows " + Range(first, last) + ")" + buf);
  }
  return Status::OK();
}

Status Table::VerifyBlock(std::uint64_t b) const {
  auto [first, last] = BlockRange(b);
  return CheckBlock(b, std::span<const std::byte>(base_ + data_offset_ + first * row_bytes_,
                                                  (last - first) * row_bytes_));
}

Status Table::VerifyRows(std::uint64_t begin, std::uint64_t end) const {
  EMBSTORE_RETURN_NOT_OK(RowBytes(begin, end).status());
  if (begin == end) return Status::OK();
  for (std::uint64_t b = begin / block_rows_; b <= (end - 1) / block_rows_; ++b) {
    EMBSTORE_RETURN_NOT_OK(VerifyBlock(b));
  }
  return CheckIntact();
}

Status Table::VerifyRowsOnce(std::uint64_t begin, std::uint64_t end) const {
  EMBSTORE_RETURN_NOT_OK(RowBytes(begin, end).status());
  if (begin == end) return Status::OK();
  std::call_once(verified_once_, [this] {
    verified_ = std::make_unique<std::atomic<std::uint64_t>[]>((num_blocks_ + 63) / 64);
  });
  for (std::uint64_t b = begin / block_rows_; b <= (end - 1) / block_rows_; ++b) {
    std::atomic<std::uint64_t>& word = verified_[b / 64];
    const std::uint64_t bit = std::uint64_t{1} << (b % 64);
    if (word.load(std::memory_order_acquire) & bit) continue;
    EMBSTORE_RETURN_NOT_OK(VerifyBlock(b));
    EMBSTORE_RETURN_NOT_OK(CheckIntact());
    word.fetch_or(bit, std::memory_order_release);
  }
  return Status::OK();
}

Status Table::GatherRows(std::span<const std::uint64_t> rows, std::span<std::byte> out,
                         const CopyOptions& options) const {
  const std::uint64_t per_row = options.to_f32 ? dim_ * 4 : row_bytes_;
  if (out.size() != rows.size() * per_row) {
    return Status::InvalidArgument(
        "table '" + path_ + "': output holds " + std::to_string(out.size()) + " bytes, " +
        std::to_string(rows.size()) + " rows need " + std::to_string(rows.size() * per_row));
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::uint64_t r = rows[i];
    if (r >= rows_) {
      return Status::OutOfRange("table '" + path_ + "': row " + std::to_string(r) +
                                " is outside the table's " + std::to_string(rows_) + " rows");
    }
    if (options.verify) EMBSTORE_RETURN_NOT_OK(VerifyRowsOnce(r, r + 1));
    auto src = std::span<const std::byte>(base_ + data_offset_ + r * row_bytes_, row_bytes_);
    auto dst = out.subspan(i * per_row, per_row);
    if (options.to_f32) {
      ConvertToF32(dtype_, src, std::span<float>(reinterpret_cast<float*>(dst.data()), dim_));
    } else {
      std::memcpy(dst.data(), src.data(), row_bytes_);
    }
  }
  return CheckIntact();
}

Status Table::VerifyKeys() const {
  if (!has_keys_ || key_checksums_ == nullptr) return Status::OK();
  if (keys_verified_.load(std::memory_order_acquire)) return Status::OK();
  const std::pair<std::string_view, std::span<const std::byte>> parts[] = {
      {kTensorKeyOffsets, {key_offsets_, (rows_ + 1) * 8}},
      {kTensorKeyIndex, {key_index_, key_slots_ * 8}},
      {kTensorKeyBytes, {reinterpret_cast<const std::byte*>(key_data_), key_bytes_size_}},
  };
  for (int i = 0; i < 3; ++i) {
    const std::uint64_t want = LoadU64(key_checksums_ + 8 * i);
    const std::uint64_t got = Checksum64(parts[i].second);
    if (got != want) {
      EMBSTORE_RETURN_NOT_OK(CheckIntact());
      char buf[96];
      std::snprintf(buf, sizeof buf, ": stored %016llx, computed %016llx",
                    static_cast<unsigned long long>(want), static_cast<unsigned long long>(got));
      return Status::Corruption("'" + path_ + "': checksum mismatch in " +
                                std::string(parts[i].first) + " (the table's keys)" + buf);
    }
  }
  EMBSTORE_RETURN_NOT_OK(CheckIntact());
  keys_verified_.store(true, std::memory_order_release);
  return Status::OK();
}

std::uint64_t Table::StoredRowHash(std::uint64_t row) const {
  return LoadU64(row_hashes_ + 8 * row);
}

Status Table::RowHashes(std::uint64_t begin, std::uint64_t end,
                        std::span<std::uint64_t> out) const {
  if (begin > end || end > rows_ || out.size() != end - begin) {
    return Status::InvalidArgument("'" + path_ + "': row hashes of rows " + Range(begin, end) +
                                   " of " + std::to_string(rows_) + " into " +
                                   std::to_string(out.size()) + " values");
  }
  if (row_hashes_ != nullptr) {
    for (std::uint64_t r = begin; r < end; ++r) out[r - begin] = StoredRowHash(r);
  } else {
    EMBSTORE_RETURN_NOT_OK(VerifyRowsOnce(begin, end));
    const std::byte* rows = base_ + data_offset_;
    for (std::uint64_t r = begin; r < end; ++r) {
      out[r - begin] = Checksum64({rows + r * row_bytes_, row_bytes_});
    }
  }
  return CheckIntact();
}

Status Table::VerifyRowHashes(std::uint64_t begin, std::uint64_t end) const {
  if (row_hashes_ == nullptr) return Status::OK();
  const std::byte* rows = base_ + data_offset_;
  for (std::uint64_t r = begin; r < end && r < rows_; ++r) {
    if (Checksum64({rows + r * row_bytes_, row_bytes_}) != StoredRowHash(r)) {
      EMBSTORE_RETURN_NOT_OK(CheckIntact());
      return Status::Corruption("'" + path_ + "': the stored hash of row " + std::to_string(r) +
                                " does not match the row (row_hashes is corrupt)");
    }
  }
  return CheckIntact();
}

Result<bool> Table::CheckRowHashesChecksum() const {
  if (row_hashes_ == nullptr) return false;
  const auto stored = metadata_.find(std::string(kMetaRowHashesChecksum));
  if (stored == metadata_.end()) return false;
  const std::string got = ContentIdHex(Checksum64({row_hashes_, 8 * rows_}));
  EMBSTORE_RETURN_NOT_OK(CheckIntact());
  if (got != stored->second) {
    return Status::Corruption("'" + path_ + "': the row hashes do not match their checksum (" +
                              std::string(kMetaRowHashesChecksum) + " " + stored->second +
                              ", computed " + got + "): row_hashes is corrupt");
  }
  return true;
}

Status Table::VerifyRowHashesOnce() const {
  if (row_hashes_verified_.load(std::memory_order_acquire)) return Status::OK();
  EMBSTORE_RETURN_NOT_OK(VerifyRowsOnce(0, rows_));
  EMBSTORE_RETURN_NOT_OK(VerifyRowHashes(0, rows_));
  row_hashes_verified_.store(true, std::memory_order_release);
  return Status::OK();
}

Status Table::VerifyAll(const ProgressFn& progress) const {
  const std::uint64_t total = rows_ * row_bytes_;
  const std::uint64_t step =
      std::max<std::uint64_t>(1, (64u << 20) / std::max<std::uint64_t>(1, block_bytes_));
  for (std::uint64_t b = 0; b < num_blocks_; b += step) {
    const std::uint64_t last_block = num_blocks_ - b <= step ? num_blocks_ - 1 : b + step - 1;
    const std::uint64_t end = BlockRange(last_block).second;
    EMBSTORE_RETURN_NOT_OK(VerifyRows(BlockRange(b).first, end));
    EMBSTORE_RETURN_NOT_OK(VerifyRowHashes(BlockRange(b).first, end));
    if (progress && !progress(end * row_bytes_, total)) {
      return Status::Cancelled("verification of '" + path_ + "' cancelled");
    }
  }
  EMBSTORE_RETURN_NOT_OK(CheckRowHashesChecksum().status());
  return VerifyKeys();
}

std::string_view Table::Key(std::uint64_t row) const {
  std::uint64_t b = LoadU64(key_offsets_ + 8 * row);
  std::uint64_t e = LoadU64(key_offsets_ + 8 * (row + 1));
  // Parse() checked the offsets; a file rewritten in place since may hold any bytes, and a
  // read through them must stay inside the key bytes (the caller's CheckIntact() or key
  // checksums then tell that the data is not to be trusted).
  if (b > e || e > key_bytes_size_) return {};
  return std::string_view(key_data_ + b, e - b);
}

Result<std::optional<std::uint64_t>> Table::FindKey(std::string_view key) const {
  if (!has_keys_) return std::optional<std::uint64_t>();
  std::uint64_t s = XXH3_64bits(key.data(), key.size()) & (key_slots_ - 1);
  // Parse() checked that fewer rows than slots are filled, so a probe of an intact index ends at
  // an empty slot. A file changed underneath may hold anything: the probe is bounded by the
  // index's size, every row and key span it reads is checked, and a truncated file (its lost
  // pages read as zeros, which never hold an empty slot) is reported within 64 probes.
  for (std::uint64_t probes = 0; probes < key_slots_; ++probes) {
    const std::uint64_t row = LoadU64(key_index_ + 8 * s);
    if (row == kEmptySlot) {
      EMBSTORE_RETURN_NOT_OK(CheckIntact());
      return std::optional<std::uint64_t>();
    }
    const std::uint64_t b = row < rows_ ? LoadU64(key_offsets_ + 8 * row) : 0;
    const std::uint64_t e = row < rows_ ? LoadU64(key_offsets_ + 8 * (row + 1)) : 0;
    if (row >= rows_ || b > e || e > key_bytes_size_) {
      EMBSTORE_RETURN_NOT_OK(CheckIntact());
      return Status::Corruption("'" + path_ + "': keys.index slot " + std::to_string(s) +
                                " names row " + std::to_string(row) +
                                (row >= rows_
                                     ? " of " + std::to_string(rows_)
                                     : " whose key spans " + Range(b, e) + " of " +
                                           std::to_string(key_bytes_size_) + " key bytes") +
                                " (the file changed after it was opened)");
    }
    if (std::string_view(key_data_ + b, e - b) == key) {
      EMBSTORE_RETURN_NOT_OK(CheckIntact());
      return std::optional<std::uint64_t>(row);
    }
    if ((probes & 63) == 63) EMBSTORE_RETURN_NOT_OK(CheckIntact());
    s = (s + 1) & (key_slots_ - 1);
  }
  EMBSTORE_RETURN_NOT_OK(CheckIntact());
  return Status::Corruption("'" + path_ + "': keys.index has no empty slot (all " +
                            std::to_string(key_slots_) +
                            " are filled: the file changed after it was opened)");
}

std::uint64_t ContentId(const Table& t) {
  std::vector<std::uint64_t> words;
  words.reserve(4 + t.num_blocks());
  words.push_back(t.rows());
  words.push_back(t.dim());
  words.push_back(static_cast<std::uint64_t>(t.dtype()));
  words.push_back(t.block_rows());
  for (std::uint64_t b = 0; b < t.num_blocks(); ++b) words.push_back(t.BlockChecksum(b));
  return Checksum64(std::as_bytes(std::span<const std::uint64_t>(words)));  // little-endian host
}

std::string ContentIdHex(std::uint64_t content_id) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(content_id));
  return buf;
}

TableDesc DescribeTable(const Table& t, std::string name) {
  return DescribeTable(t, std::move(name), ContentId(t));
}

TableDesc DescribeTable(const Table& t, std::string name, std::uint64_t content_id) {
  TableDesc d;
  d.name = std::move(name);
  d.rows = t.rows();
  d.dim = t.dim();
  d.dtype = t.dtype();
  d.row_bytes = t.row_bytes();
  d.content_id = content_id;
  d.block_rows = t.block_rows();
  d.num_blocks = t.num_blocks();
  d.has_keys = t.has_keys();
  d.key_bytes = t.has_keys() ? t.key_bytes() : 0;
  d.format_version = t.format_version();
  d.data_offset = t.data_offset();
  d.metadata = t.user_metadata();
  return d;
}

}  // namespace embstore::store
