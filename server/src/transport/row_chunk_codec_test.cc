#include "row_chunk_codec.h"

#include <grpcpp/impl/codegen/proto_utils.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "zero_copy.h"

namespace embstore::server {
namespace {

class RowChunkCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteTestTable(dir_.File("t.emb"), {.rows = 300, .block_rows = 32}).ok());
    catalog_ = Catalog::Open({.dir = dir_.path()}).value();
    entry_ = catalog_->Get("t").value();
  }

  RowChunkView View(std::uint64_t begin, std::uint64_t end, bool first) {
    RowChunkView c;
    c.entry = entry_;
    c.first_row = begin;
    c.row_count = end - begin;
    c.first_block = begin / 32;
    for (std::uint64_t b = begin / 32; b <= (end - 1) / 32; ++b) {
      c.block_checksums.push_back(entry_->table().BlockChecksum(b));
    }
    c.content_id = entry_->content_id();
    c.first = first;
    c.chunk_rows = first ? 64 : 0;
    c.payload = entry_->table().RowBytes(begin, end).value();
    return c;
  }

  testing::TempDir dir_;
  std::unique_ptr<Catalog> catalog_;
  std::shared_ptr<const TableEntry> entry_;
};

TEST_F(RowChunkCodecTest, HeaderPlusPayloadIsAValidRowChunkMessage) {
  RowChunkView c = View(40, 100, true);
  c.payload_checksum = 0;  // present-but-zero must survive
  std::string wire;
  EncodeRowChunkHeader(c, &wire);
  wire.append(reinterpret_cast<const char*>(c.payload.data()), c.payload.size());
  v1::RowChunk m;
  ASSERT_TRUE(m.ParseFromString(wire));
  EXPECT_EQ(m.first_row(), 40u);
  EXPECT_EQ(m.row_count(), 60u);
  EXPECT_EQ(m.first_block(), 1u);
  ASSERT_EQ(m.block_checksums_size(), 3);
  EXPECT_EQ(m.block_checksums(2), entry_->table().BlockChecksum(3));
  EXPECT_TRUE(m.has_payload_checksum());
  EXPECT_EQ(m.payload_checksum(), 0u);
  EXPECT_EQ(m.content_id(), entry_->content_id());
  ASSERT_TRUE(m.has_table());
  EXPECT_EQ(m.table().name(), "t");
  EXPECT_EQ(m.table().rows(), 300u);
  EXPECT_EQ(m.chunk_rows(), 64u);
  EXPECT_EQ(m.payload(), testing::ExpectedRowBytes({.rows = 300}, 40, 100));
  // Re-encoding with the protobuf library gives the same bytes: the hand encoding is canonical.
  EXPECT_EQ(m.SerializeAsString(), wire);
}

TEST_F(RowChunkCodecTest, LaterChunksCarryNoTableInfo) {
  std::string wire;
  RowChunkView c = View(64, 128, false);
  EncodeRowChunkHeader(c, &wire);
  wire.append(reinterpret_cast<const char*>(c.payload.data()), c.payload.size());
  v1::RowChunk m;
  ASSERT_TRUE(m.ParseFromString(wire));
  EXPECT_FALSE(m.has_table());
  EXPECT_FALSE(m.has_payload_checksum());
  EXPECT_EQ(m.first_row(), 64u);
}

TEST_F(RowChunkCodecTest, SerializedPayloadPointsIntoTheMappingAndHoldsIt) {
  const long refs_before = entry_.use_count();
  RowChunkView c = View(0, 300, false);
  const std::byte* mapped = c.payload.data();
  grpc::ByteBuffer bb;
  {
    OutgoingRowChunk out = OutgoingRowChunk::From(std::move(c));
    bool own = false;
    ASSERT_TRUE(grpc::SerializationTraits<OutgoingRowChunk>::Serialize(out, &bb, &own).ok());
  }
  // The OutgoingRowChunk is gone; the buffer alone keeps the mapping referenced.
  EXPECT_EQ(entry_.use_count(), refs_before + 1);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bb.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(slices[1].begin()), static_cast<const void*>(mapped));
  EXPECT_EQ(slices[1].size(), 300u * entry_->table().row_bytes());
  // And the whole buffer is a RowChunk to a stock parser.
  grpc::ByteBuffer copy(bb);
  v1::RowChunk m;
  ASSERT_TRUE(grpc::SerializationTraits<v1::RowChunk>::Deserialize(&copy, &m).ok());
  EXPECT_EQ(m.row_count(), 300u);
  EXPECT_EQ(m.payload(), testing::ExpectedRowBytes({.rows = 300}, 0, 300));
  slices.clear();
  bb.Clear();
  EXPECT_EQ(entry_.use_count(), refs_before);
}

}  // namespace
}  // namespace embstore::server
