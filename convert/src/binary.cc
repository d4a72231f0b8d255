// word2vec binary input: a "count dim" header line, then per row a token, one space and dim
// little-endian float32 values. Read sequentially (rows have no line structure to split on).
#include <algorithm>
#include <cstring>
#include <span>

#include "converter.h"
#include "embstore/store/format.h"
#include "kernel_common.h"
#include "messages.h"

namespace embstore::convert {

Status Converter::RunBinary() {
  stats_.threads = 1;
  const std::uint64_t dim = stats_.dim;
  const std::size_t vec_bytes = static_cast<std::size_t>(dim) * 4;
  const std::size_t row_bytes = writer_->row_bytes();
  // The input after the header is read into `buf` and consumed from `pos`; fill(n) makes n bytes
  // available from pos (fewer only at the end of the input). A refill moves the unread bytes to
  // the front of the buffer, so no pointer into it survives a fill(): rows are copied out of it
  // (key and values) before the next one is read.
  std::vector<char> buf(std::max<std::size_t>(o_.chunk_bytes != 0 ? o_.chunk_bytes : 1u << 20,
                                              64));
  std::size_t have = 0;
  std::size_t pos = 0;
  bool eof = false;
  auto fill = [&](std::size_t need) -> Status {
    if (have - pos >= need || eof) return Status::OK();
    std::memmove(buf.data(), buf.data() + pos, have - pos);
    have -= pos;
    pos = 0;
    if (buf.size() < need) buf.resize(need);
    while (have < need && !eof) {
      EMBSTORE_ASSIGN_OR_RETURN(std::size_t r, chunker_->ReadRaw(buf.data() + have,
                                                                 buf.size() - have));
      if (r == 0) eof = true;
      have += r;
    }
    return Status::OK();
  };
  // Byte offset (in the decompressed input) of buf[pos]; messages name it with the row number.
  std::uint64_t offset = binary_start_;
  auto at = [&](std::uint64_t row, std::uint64_t byte) {
    return BinaryWhere(row, byte);
  };
  std::vector<float> values(dim);
  // Rows are handed to the keyed-row logic (duplicates, key order) in batches of ~4 MiB.
  const std::uint64_t batch_rows =
      std::clamp<std::uint64_t>((4u << 20) / std::max<std::size_t>(row_bytes, 1), 1, 65536);
  ChunkResult r;
  r.values.resize(static_cast<std::size_t>(batch_rows) * row_bytes);
  binary_row_first_ = 0;
  binary_row_offsets_.clear();
  auto flush = [&]() -> Status {
    if (r.rows == 0) return Status::OK();
    EMBSTORE_RETURN_NOT_OK(AppendKeyedRows(r));
    rows_parsed_ += r.rows;
    binary_row_first_ += r.rows;
    r.rows = 0;
    r.keys.clear();
    r.key_ends.clear();
    r.row_line.clear();
    binary_row_offsets_.clear();
    // A mapped input's pages behind this point are not read again (keeps RSS bounded).
    if (!in_->gzip()) in_->ReleaseMapped(offset > 4096 ? offset - 4096 : 0);
    return Status::OK();
  };
  for (std::uint64_t row = 0; row < header_->count; ++row) {
    // gensim skips line breaks before a token; so does the original word2vec writer's reader.
    for (;;) {
      EMBSTORE_RETURN_NOT_OK(fill(1));
      if (pos < have && (buf[pos] == '\n' || buf[pos] == '\r')) {
        ++pos;
        ++offset;
        continue;
      }
      break;
    }
    const std::uint64_t row_offset = offset;
    // The token runs to the first space; look for it in what the buffer holds, reading more
    // until it shows up (a token is at most kMaxKeyBytes bytes).
    std::size_t key_len = 0;
    for (;;) {
      const void* sp = std::memchr(buf.data() + pos + key_len, ' ', have - pos - key_len);
      if (sp != nullptr) {
        key_len = static_cast<std::size_t>(static_cast<const char*>(sp) - (buf.data() + pos));
        break;
      }
      key_len = have - pos;
      if (key_len > kMaxKeyBytes) break;
      if (eof) break;
      EMBSTORE_RETURN_NOT_OK(fill(key_len + 1));
    }
    if (key_len > kMaxKeyBytes) {
      return Status::Corruption(at(row, row_offset) + ": no space after a token of " +
                                std::to_string(kMaxKeyBytes) + " bytes: " +
                                Quote(std::string_view(buf.data() + pos, 40)) +
                                " (keys may not be longer; is the header's dim right?)");
    }
    if (pos + key_len >= have) {
      return Status::Corruption(at(row, row_offset) + ": the file ends inside the token" +
                                (key_len ? " " + Quote(std::string_view(buf.data() + pos,
                                                                        key_len))
                                         : std::string()) +
                                "; the header " + Quote(header_->text) + " announces " +
                                std::to_string(header_->count) +
                                " rows (header count too large, or the file is truncated)");
    }
    EMBSTORE_RETURN_NOT_OK(fill(key_len + 1 + vec_bytes));
    // Only now, after the last fill of this row, may views into the buffer be taken.
    const std::string_view key(buf.data() + pos, key_len);
    std::size_t bad = 0;
    if (key_len == 0 || !ValidUtf8(key, &bad)) {
      return Status::Corruption(at(row, row_offset) + ": key " +
                                (key_len == 0 ? "is empty" : "is not valid UTF-8: ") +
                                (key_len == 0 ? "" : Quote(key)));
    }
    if (have - pos < key_len + 1 + vec_bytes) {
      return Status::Corruption(at(row, row_offset) + " " + Quote(key) + ": expected " +
                                std::to_string(vec_bytes) + " bytes of values (" +
                                std::to_string(dim) + " float32), the file ends after " +
                                std::to_string(have - pos - key_len - 1));
    }
    const char* vec = buf.data() + pos + key_len + 1;
    std::byte* dst = r.values.data() + static_cast<std::size_t>(r.rows) * row_bytes;
    if (o_.dtype == DType::kF32) {
      std::memcpy(dst, vec, vec_bytes);
    } else {
      std::memcpy(values.data(), vec, vec_bytes);
      auto over = ConvertFromF32(o_.dtype, values, std::span<std::byte>(dst, row_bytes),
                                 o_.on_overflow);
      if (over.has_value()) {
        return Status::Corruption(at(row, row_offset) + " " + Quote(key) + ", value " +
                                  std::to_string(*over + 1) + " (" +
                                  std::to_string(values[*over]) + ") is out of range for " +
                                  std::string(DTypeName(o_.dtype)) +
                                  " (`on_overflow` inf stores it as infinity)");
      }
    }
    r.keys.append(key.data(), key.size());
    r.key_ends.push_back(static_cast<std::uint32_t>(r.keys.size()));
    r.row_line.push_back(static_cast<std::uint32_t>(r.rows));
    binary_row_offsets_.push_back(row_offset);
    ++r.rows;
    pos += key_len + 1 + vec_bytes;
    offset += key_len + 1 + vec_bytes;
    stats_.input_bytes = offset;
    if (r.rows == batch_rows) {
      EMBSTORE_RETURN_NOT_OK(flush());
      if (!ReportProgress()) return Status::Cancelled("conversion cancelled");
    }
  }
  EMBSTORE_RETURN_NOT_OK(flush());
  // Only line breaks may follow the last row.
  for (;;) {
    EMBSTORE_RETURN_NOT_OK(fill(1));
    if (pos >= have) break;
    if (buf[pos] != '\n' && buf[pos] != '\r') {
      return Status::Corruption(in_->display_name() + ": byte " + std::to_string(offset) +
                                ": word2vec-binary data continues after the " +
                                std::to_string(header_->count) + " rows the header " +
                                Quote(header_->text) + " announces");
    }
    ++pos;
    ++offset;
  }
  stats_.input_bytes = offset;
  return Status::OK();
}
}  // namespace embstore::convert
