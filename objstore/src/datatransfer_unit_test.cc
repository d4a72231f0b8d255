// The pieces of direct HDFS block reads that need no cluster: the CRCs, Hadoop's token
// encoding and the NameNode's block locations. The reads themselves run against a real HDFS in
// webhdfs_test.cc.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "crc.h"
#include "datatransfer.h"

namespace embstore::objstore::internal {
namespace {

std::span<const std::byte> Bytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

TEST(CrcTest, CheckValues) {
  EXPECT_EQ(Crc32c(Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32cPortable(Bytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32(Bytes("123456789")), 0xCBF43926u);
  EXPECT_EQ(Crc32c({}), 0u);
}

TEST(CrcTest, InstructionsAgreeWithTheTableAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(7);
  std::vector<std::byte> buf(4096 + 16);
  for (auto& b : buf) b = static_cast<std::byte>(rng());
  for (std::size_t start = 0; start < 16; ++start) {
    for (std::size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 511u, 512u, 513u, 4096u}) {
      auto piece = std::span<const std::byte>(buf).subspan(start, len);
      ASSERT_EQ(Crc32c(piece), Crc32cPortable(piece)) << "start " << start << ", " << len;
    }
  }
}

TEST(CrcTest, ChunksAreHashedEachOnItsOwn) {
  std::mt19937_64 rng(9);
  for (std::size_t len : {0u, 100u, 512u, 2048u, 2049u, 65536u, 65536u + 300u}) {
    std::vector<std::byte> buf(len);
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    const std::size_t chunks = (len + 511) / 512;
    std::vector<std::uint32_t> got(chunks);
    Crc32cChunks(buf, 512, got);
    for (std::size_t c = 0; c < chunks; ++c) {
      auto piece = std::span<const std::byte>(buf).subspan(
          c * 512, std::min<std::size_t>(512, len - c * 512));
      ASSERT_EQ(got[c], Crc32cPortable(piece)) << "length " << len << ", chunk " << c;
    }
  }
}

// URL-safe base64 without padding, as Hadoop's Token.encodeToUrlString writes it.
std::string Base64Url(const std::string& raw) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : raw) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  return out;
}

TEST(HadoopTokenTest, DecodesTheUrlStringForm) {
  auto empty = DecodeHadoopToken("AAAAAA");  // an insecure cluster's empty block token
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->empty());
  // A 200-byte identifier needs a two-byte vint (0x8f 0xc8), as Hadoop writes it.
  const std::string id(200, 'i');
  std::string raw = std::string("\x8f\xc8", 2) + id + "\x03pwd" + "\x10HDFS_BLOCK_TOKEN" + '\0';
  auto t = DecodeHadoopToken(Base64Url(raw));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->identifier, id);
  EXPECT_EQ(t->password, "pwd");
  EXPECT_EQ(t->kind, "HDFS_BLOCK_TOKEN");
  EXPECT_EQ(t->service, "");
  EXPECT_FALSE(t->empty());
}

TEST(HadoopTokenTest, RefusesWhatIsNotOne) {
  EXPECT_FALSE(DecodeHadoopToken("not base64!").ok());
  EXPECT_FALSE(DecodeHadoopToken(Base64Url("\x05"
                                           "ab"))
                   .ok());  // shorter than its length
  EXPECT_FALSE(DecodeHadoopToken(Base64Url(std::string("\x8f", 1))).ok());
}

TEST(LocatedBlocksTest, ReadsTheNameNodesAnswer) {
  const std::string json = R"({"LocatedBlocks":{"fileLength":1536,"isUnderConstruction":false,
    "isLastBlockComplete":true,"lastLocatedBlock":null,"locatedBlocks":[
    {"block":{"blockId":1073741825,"blockPoolId":"BP-1","generationStamp":1001,"numBytes":1024},
     "blockToken":{"urlString":"AAAAAA"},"isCorrupt":false,"startOffset":0,
     "locations":[{"ipAddr":"127.0.0.1","xferPort":9866,"hostName":"a"},
                  {"ipAddr":"::1","xferPort":9867,"hostName":"b"}]},
    {"block":{"blockId":1073741826,"blockPoolId":"BP-1","generationStamp":1002,"numBytes":512},
     "blockToken":{"urlString":"AAAAAA"},"isCorrupt":false,"startOffset":1024,
     "locations":[{"ipAddr":"10.0.0.2","xferPort":1004}]}]}})";
  auto blocks = ParseLocatedBlocks("hdfs://nn/f", json);
  ASSERT_TRUE(blocks.ok()) << blocks.status().ToString();
  ASSERT_EQ(blocks->size(), 2u);
  EXPECT_EQ((*blocks)[0].block_id, 1073741825u);
  EXPECT_EQ((*blocks)[0].generation_stamp, 1001u);
  EXPECT_EQ((*blocks)[0].bytes, 1024u);
  EXPECT_EQ((*blocks)[0].pool_id, "BP-1");
  EXPECT_EQ((*blocks)[0].datanodes, (std::vector<std::string>{"127.0.0.1:9866", "[::1]:9867"}));
  EXPECT_EQ((*blocks)[1].file_offset, 1024u);
  EXPECT_EQ((*blocks)[1].datanodes, std::vector<std::string>{"10.0.0.2:1004"});

  auto bad = ParseLocatedBlocks("hdfs://nn/f", R"({"LocatedBlocks":{"locatedBlocks":[{}]}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hdfs://nn/f"), std::string::npos);
  EXPECT_FALSE(ParseLocatedBlocks("hdfs://nn/f", "<html>").ok());
}

}  // namespace
}  // namespace embstore::objstore::internal
