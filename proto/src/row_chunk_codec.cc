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
  auto fail = [&](const char* what) {
    *error = std::string("malformed RowChunk: ") + what;
    return false;
  };
  while (!cur.AtEnd()) {
    std::uint64_t key, v;
    if (!cur.Varint(&key)) return fail("truncated field key");
    const std::uint64_t field = key >> 3;
    switch (static_cast<std::uint32_t>(key & 7)) {
      case kVarint:
        if (!cur.Varint(&v)) return fail("truncated varint");
        if (field == kFirstRow) f.first_row = v;
        if (field == kRowCount) f.row_count = v;
        if (field == kFirstBlock) f.first_block = v;
        if (field == kChunkRows) f.chunk_rows = v;
        break;
      case kFixed64:
        if (!cur.Fixed(8, &v)) return fail("truncated fixed64");
        if (field == kPayloadChecksum) f.payload_checksum = v;
        if (field == kContentId) f.content_id = v;
        if (field == kBlockChecksums) f.block_checksums.push_back(v);  // not packed: also valid
        break;
      case kFixed32:
        if (!cur.Fixed(4, &v)) return fail("truncated fixed32");
        break;
      case kBytes: {
        if (!cur.Varint(&v)) return fail("truncated length");
        if (field == kPayload) {
          out->payload.clear();
          f.payload_size = v;
          if (!cur.Take(v, &out->payload)) return fail("truncated payload");
        } else if (field == kBlockChecksums) {
          if (v % 8 != 0) return fail("packed checksums are not whole fixed64s");
          for (std::uint64_t i = 0; i < v / 8; ++i) {
            std::uint64_t s;
            if (!cur.Fixed(8, &s)) return fail("truncated checksums");
            f.block_checksums.push_back(s);
          }
        } else if (field == kTableInfo) {
          std::vector<Piece> info;
          if (!cur.Take(v, &info)) return fail("truncated table info");
          f.table_info.clear();
          for (const auto& p : info) f.table_info.append(reinterpret_cast<const char*>(p.data()), p.size());
        } else if (!cur.Take(v, nullptr)) {  // unknown fields: skipped
          return fail("truncated field");
        }
        break;
      }
      default:
        return fail("unknown wire type");
    }
  }
  return true;
}

}  // namespace embstore::wire
