#include "row_chunk_codec.h"

#include <cstdint>

namespace embstore::server {
namespace {

// Protobuf wire types (protobuf encoding spec, "Message Structure").
constexpr std::uint32_t kVarint = 0;
constexpr std::uint32_t kFixed64 = 1;
constexpr std::uint32_t kLengthDelimited = 2;

void PutVarint(std::uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutTag(std::uint32_t field, std::uint32_t wire_type, std::string* out) {
  PutVarint((static_cast<std::uint64_t>(field) << 3) | wire_type, out);
}

void PutFixed64(std::uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// proto3 leaves scalar fields at their default value off the wire.
void PutVarintField(std::uint32_t field, std::uint64_t v, std::string* out) {
  if (v == 0) return;
  PutTag(field, kVarint, out);
  PutVarint(v, out);
}

}  // namespace

void EncodeRowChunkHeader(const RowChunkView& c, std::string* out) {
  // Field numbers: embstore.proto, message RowChunk.
  PutVarintField(1, c.first_row, out);
  PutVarintField(2, c.row_count, out);
  PutVarintField(3, c.first_block, out);
  if (!c.block_checksums.empty()) {  // repeated fixed64, packed
    PutTag(4, kLengthDelimited, out);
    PutVarint(8 * c.block_checksums.size(), out);
    for (std::uint64_t sum : c.block_checksums) PutFixed64(sum, out);
  }
  if (c.payload_checksum.has_value()) {  // proto3 optional: present even when 0
    PutTag(5, kFixed64, out);
    PutFixed64(*c.payload_checksum, out);
  }
  if (c.content_id != 0) {
    PutTag(6, kFixed64, out);
    PutFixed64(c.content_id, out);
  }
  if (c.first && c.entry) {
    v1::TableInfo info;
    Service::FillTableInfo(*c.entry, false, &info);
    std::string encoded = info.SerializeAsString();
    PutTag(7, kLengthDelimited, out);
    PutVarint(encoded.size(), out);
    out->append(encoded);
  }
  PutVarintField(8, c.chunk_rows, out);
  if (!c.payload.empty()) {
    PutTag(15, kLengthDelimited, out);
    PutVarint(c.payload.size(), out);
  }
}

}  // namespace embstore::server
