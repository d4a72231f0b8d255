#include "test_util.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "embstore/store/checksum.h"
#include "embstore/store/writer.h"

namespace embstore::server::testing {

float TestValue(std::uint64_t row, std::uint64_t col, float salt) {
  return static_cast<float>(row % 1000) + static_cast<float>(col % 8) * 0.125f + salt;
}

std::string TestKey(std::uint64_t row) { return "key-" + std::to_string(row); }

Status WriteTestTable(const std::string& path, const TableSpec& spec) {
  store::WriterOptions o;
  o.dim = spec.dim;
  o.dtype = spec.dtype;
  o.with_keys = spec.with_keys;
  o.block_rows = spec.block_rows;
  o.overwrite = true;
  o.metadata["purpose"] = "server test";
  EMBSTORE_ASSIGN_OR_RETURN(auto w, store::TableWriter::Create(path, o));
  std::vector<float> row(spec.dim);
  std::vector<float> batch;
  batch.reserve(1024 * spec.dim);
  for (std::uint64_t r = 0; r < spec.rows; ++r) {
    for (std::uint64_t c = 0; c < spec.dim; ++c) batch.push_back(TestValue(r, c, spec.salt));
    if (batch.size() >= 1024 * spec.dim || r + 1 == spec.rows) {
      EMBSTORE_RETURN_NOT_OK(w->AppendRowsF32(batch));
      batch.clear();
    }
  }
  if (spec.with_keys) {
    for (std::uint64_t r = 0; r < spec.rows; ++r) EMBSTORE_RETURN_NOT_OK(w->AppendKey(TestKey(r)));
  }
  return w->Finish();
}

std::string ExpectedRowBytes(const TableSpec& spec, std::uint64_t begin, std::uint64_t end) {
  std::vector<float> values;
  values.reserve((end - begin) * spec.dim);
  for (std::uint64_t r = begin; r < end; ++r) {
    for (std::uint64_t c = 0; c < spec.dim; ++c) values.push_back(TestValue(r, c, spec.salt));
  }
  const std::size_t esize = store::DTypeSize(spec.dtype);
  std::string out(values.size() * esize, '\0');
  std::span<std::byte> dst(reinterpret_cast<std::byte*>(out.data()), out.size());
  if (spec.dtype == store::DType::kF32) {
    std::memcpy(out.data(), values.data(), out.size());
  } else {
    (void)store::ConvertFromF32(spec.dtype, values, dst, store::OverflowPolicy::kInfinity);
  }
  return out;
}

std::string CheckRowStream(const std::vector<v1::RowChunk>& chunks, std::uint64_t begin,
                           std::uint64_t end, const std::string& expected) {
  if (chunks.empty()) return "no chunks";
  const v1::RowChunk& first = chunks.front();
  if (!first.has_table()) return "first chunk has no table info";
  const std::uint64_t row_bytes = first.table().row_bytes();
  const std::uint64_t block_rows = first.table().block_rows();
  const std::uint64_t rows = first.table().rows();
  std::uint64_t next = begin;
  std::string got;
  // Blocks assembled across consecutive chunks (sub-block mode): index, bytes so far, stored sum.
  std::uint64_t pending_block = ~0ull;
  std::string pending;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const v1::RowChunk& c = chunks[i];
    const std::string where = "chunk " + std::to_string(i) + ": ";
    if (i > 0 && c.has_table()) return where + "table info repeated";
    if (c.content_id() != first.content_id()) return where + "content_id changed";
    if (c.first_row() != next) {
      return where + "first_row " + std::to_string(c.first_row()) + ", expected " +
             std::to_string(next);
    }
    if (c.payload().size() != c.row_count() * row_bytes) return where + "payload size wrong";
    if (c.row_count() == 0) {
      if (chunks.size() != 1) return where + "empty chunk in a non-empty stream";
      continue;
    }
    if (c.first_block() != c.first_row() / block_rows) return where + "first_block wrong";
    const std::uint64_t last_block = (c.first_row() + c.row_count() - 1) / block_rows;
    if (static_cast<std::uint64_t>(c.block_checksums_size()) != last_block - c.first_block() + 1) {
      return where + "wrong number of block checksums";
    }
    bool cut = false;  // some block of this chunk is not sent entirely by the stream
    for (std::uint64_t b = c.first_block(); b <= last_block; ++b) {
      const std::uint64_t b_begin = b * block_rows;
      const std::uint64_t b_end = std::min(rows, b_begin + block_rows);
      if (b_begin < begin || b_end > end) {
        cut = true;
        continue;
      }
      const std::uint64_t from = std::max(b_begin, c.first_row());
      const std::uint64_t to = std::min(b_end, c.first_row() + c.row_count());
      if (from == b_begin) {
        pending_block = b;
        pending.clear();
      }
      if (pending_block != b) return where + "block " + std::to_string(b) + " not contiguous";
      pending.append(c.payload().data() + (from - c.first_row()) * row_bytes,
                     (to - from) * row_bytes);
      if (to == b_end) {
        auto bytes = std::as_bytes(std::span<const char>(pending.data(), pending.size()));
        if (store::Checksum64(bytes) != c.block_checksums(static_cast<int>(b - c.first_block()))) {
          return where + "block " + std::to_string(b) + " fails its checksum";
        }
        pending_block = ~0ull;
      }
    }
    if (cut != c.has_payload_checksum()) {
      return where + (cut ? "chunk of a cut block without payload_checksum"
                          : "payload_checksum where the stored sums suffice");
    }
    if (c.has_payload_checksum()) {
      auto bytes = std::as_bytes(std::span<const char>(c.payload().data(), c.payload().size()));
      if (store::Checksum64(bytes) != c.payload_checksum()) return where + "payload_checksum wrong";
    }
    got += c.payload();
    next += c.row_count();
  }
  if (next != end) return "stream ended at row " + std::to_string(next);
  if (pending_block != ~0ull) return "block " + std::to_string(pending_block) + " incomplete";
  if (got != expected) return "payload bytes differ from the table";
  return "";
}

}  // namespace embstore::server::testing
