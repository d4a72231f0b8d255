#include "embstore/proto/row_chunk_codec.h"

#include <cstring>

#include "wire_format.h"

namespace embstore::wire {
namespace {

// Field numbers of message RowChunk (proto/embstore/v1/embstore.proto).
constexpr std::uint32_t kFirstRow = 1, kRowCount = 2, kFirstBlock = 3, kBlockChecksums = 4,
                        kPayloadChecksum = 5, kContentId = 6, kTableInfo = 7, kChunkRows = 8,
                        kPayload = 15;
}  // namespace

void EncodeRowChunkHeader(const RowChunkFields& f, std::string* out) {
  PutVarintField(kFirstRow, f.first_row, out);
  PutVarintField(kRowCount, f.row_count, out);
  PutVarintField(kFirstBlock, f.first_block, out);
  if (!f.block_checksums.empty()) {  // repeated fixed64, packed
    PutTag(kBlockChecksums, kBytes, out);
    PutVarint(8 * f.block_checksums.size(), out);
    for (std::uint64_t sum : f.block_checksums) PutFixed64(sum, out);
  }
  if (f.payload_checksum.has_value()) {  // proto3 optional: present even when 0
    PutTag(kPayloadChecksum, kFixed64, out);
    PutFixed64(*f.payload_checksum, out);
  }
  if (f.content_id != 0) {
    PutTag(kContentId, kFixed64, out);
    PutFixed64(f.content_id, out);
  }
  if (!f.table_info.empty()) {
    PutTag(kTableInfo, kBytes, out);
    PutVarint(f.table_info.size(), out);
    out->append(f.table_info);
  }
  PutVarintField(kChunkRows, f.chunk_rows, out);
  if (f.payload_size > 0) {
    PutTag(kPayload, kBytes, out);
    PutVarint(f.payload_size, out);
  }
}

void DecodedRowChunk::CopyPayload(std::byte* dst) const {
  for (const auto& p : payload) {
    std::memcpy(dst, p.data(), p.size());
    dst += p.size();
  }
}

bool DecodeRowChunk(std::span<const Piece> pieces, DecodedRowChunk* out, std::string* error) {
  *out = DecodedRowChunk();
  RowChunkFields& f = out->fields;
  Cursor cur(pieces);
  const char* wrong = ReadFields(
      cur,
      [&](std::uint64_t field, std::uint64_t v) -> const char* {
        if (field == kFirstRow) f.first_row = v;
        if (field == kRowCount) f.row_count = v;
        if (field == kFirstBlock) f.first_block = v;
        if (field == kChunkRows) f.chunk_rows = v;
        return nullptr;
      },
      [&](std::uint64_t field, std::uint64_t v) -> const char* {
        if (field == kPayloadChecksum) f.payload_checksum = v;
        if (field == kContentId) f.content_id = v;
        if (field == kBlockChecksums) f.block_checksums.push_back(v);  // not packed: also valid
        return nullptr;
      },
      [&](std::uint64_t field, std::uint64_t v) -> const char* {
        if (field == kPayload) {
          out->payload.clear();
          f.payload_size = v;
          return cur.Take(v, &out->payload) ? nullptr : "truncated payload";
        }
        if (field == kBlockChecksums) {
          return ReadPackedFixed64(cur, v, &f.block_checksums,
                                   "packed checksums are not whole fixed64s", "truncated checksums");
        }
        if (field == kTableInfo) {
          std::vector<Piece> info;
          if (!cur.Take(v, &info)) return "truncated table info";
          f.table_info.clear();
          for (const auto& p : info) {
            f.table_info.append(reinterpret_cast<const char*>(p.data()), p.size());
          }
          return nullptr;
        }
        return SkipBytes(cur, v);  // unknown fields: skipped
      });
  if (wrong == nullptr) return true;
  *error = std::string("malformed RowChunk: ") + wrong;
  return false;
}

}  // namespace embstore::wire
