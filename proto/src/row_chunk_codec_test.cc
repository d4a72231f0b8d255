// The RowChunk wire codec against protobuf's own encoder and parser: what the codec writes any
// protobuf parser reads, and what protobuf writes the codec reads, however the message is split
// into pieces (gRPC hands it over as slices of any size).
#include "embstore/proto/row_chunk_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embstore/v1/embstore.pb.h"

namespace embstore::wire {
namespace {

RowChunkFields Sample() {
  RowChunkFields f;
  f.first_row = 300;
  f.row_count = 77;
  f.first_block = 9;
  f.block_checksums = {1, 0xffffffffffffffffull, 12345};
  f.payload_checksum = 0;  // present-but-zero must survive
  f.content_id = 0xabcdef;
  v1::TableInfo info;
  info.set_name("t");
  info.set_rows(1000);
  f.table_info = info.SerializeAsString();
  f.chunk_rows = 64;
  return f;
}

TEST(RowChunkCodec, HeaderPlusPayloadIsARowChunkThatProtobufParses) {
  RowChunkFields f = Sample();
  const std::string payload(1000, 'x');
  f.payload_size = payload.size();
  std::string wire;
  EncodeRowChunkHeader(f, &wire);
  wire += payload;
  v1::RowChunk m;
  ASSERT_TRUE(m.ParseFromString(wire));
  EXPECT_EQ(m.first_row(), 300u);
  EXPECT_EQ(m.row_count(), 77u);
  EXPECT_EQ(m.first_block(), 9u);
  ASSERT_EQ(m.block_checksums_size(), 3);
  EXPECT_EQ(m.block_checksums(1), 0xffffffffffffffffull);
  EXPECT_TRUE(m.has_payload_checksum());
  EXPECT_EQ(m.payload_checksum(), 0u);
  EXPECT_EQ(m.content_id(), 0xabcdefu);
  EXPECT_EQ(m.table().name(), "t");
  EXPECT_EQ(m.chunk_rows(), 64u);
  EXPECT_EQ(m.payload(), payload);
}

TEST(RowChunkCodec, DecodesProtobufsEncodingSplitAnywhere) {
  v1::RowChunk m;
  m.set_first_row(5);
  m.set_row_count(3);
  m.set_first_block(1);
  m.add_block_checksums(42);
  m.add_block_checksums(43);
  m.set_payload_checksum(7);
  m.set_content_id(99);
  m.mutable_table()->set_rows(8);
  m.set_payload(std::string("abcdefghijklmnopqrstuvwxyz0123"));
  const std::string wire = m.SerializeAsString();
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(wire.data());
  for (std::size_t cut1 = 0; cut1 <= wire.size(); ++cut1) {
    for (std::size_t cut2 = cut1; cut2 <= wire.size(); cut2 += 3) {
      std::vector<Piece> pieces{Piece(bytes, cut1), Piece(bytes + cut1, cut2 - cut1),
                                Piece(bytes + cut2, wire.size() - cut2)};
      DecodedRowChunk c;
      std::string error;
      ASSERT_TRUE(DecodeRowChunk(pieces, &c, &error)) << cut1 << "/" << cut2 << ": " << error;
      EXPECT_EQ(c.fields.first_row, 5u);
      EXPECT_EQ(c.fields.block_checksums, (std::vector<std::uint64_t>{42, 43}));
      EXPECT_EQ(c.fields.payload_checksum, 7u);
      EXPECT_EQ(c.fields.content_id, 99u);
      ASSERT_EQ(c.fields.payload_size, 30u);
      std::string payload(30, '\0');
      c.CopyPayload(reinterpret_cast<std::byte*>(payload.data()));
      EXPECT_EQ(payload, m.payload());
      v1::TableInfo info;
      ASSERT_TRUE(info.ParseFromString(c.fields.table_info));
      EXPECT_EQ(info.rows(), 8u);
    }
  }
}

TEST(RowChunkCodec, MalformedMessagesAreRefusedNamingWhat) {
  RowChunkFields f = Sample();
  f.payload_size = 100;
  std::string wire;
  EncodeRowChunkHeader(f, &wire);
  wire += std::string(40, 'y');  // the payload is cut short
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(wire.data());
  std::vector<Piece> pieces{Piece(bytes, wire.size())};
  DecodedRowChunk c;
  std::string error;
  EXPECT_FALSE(DecodeRowChunk(pieces, &c, &error));
  EXPECT_EQ(error, "malformed RowChunk: truncated payload");
  const std::uint8_t bad_wire_type[] = {0x0f};  // field 1, wire type 7
  pieces = {Piece(bad_wire_type, 1)};
  EXPECT_FALSE(DecodeRowChunk(pieces, &c, &error));
  EXPECT_EQ(error, "malformed RowChunk: unknown wire type");
  const std::uint8_t endless_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                         0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  pieces = {Piece(endless_varint, sizeof endless_varint)};
  EXPECT_FALSE(DecodeRowChunk(pieces, &c, &error));
}

}  // namespace
}  // namespace embstore::wire
