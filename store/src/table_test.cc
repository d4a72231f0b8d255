#include "embstore/store/table.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embstore/store/checksum.h"
#include "embstore/store/format.h"
#include "header.h"
#include "test_util.h"

namespace embstore::store {
namespace {

using testing::MakeKeys;
using testing::RandomMatrix;
using testing::TempDir;
using testing::WriteTable;

TEST(Table, OpensMissingFileAsNotFound) {
  auto t = Table::Open("/tmp/definitely-not-here.emb");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("definitely-not-here.emb"), std::string::npos);
}

TEST(Table, RejectsADirectory) {
  auto t = Table::Open(TempDir());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
}

TEST(Table, RowViewsAndRangeErrors) {
  std::string path = TempDir() + "/t.emb";
  auto values = RandomMatrix(10, 4, 5);
  ASSERT_TRUE(WriteTable(path, values, 4, DType::kF32, nullptr).ok());
  auto t = *Table::Open(path);
  auto rows = t->Rows<float>(2, 5);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 12u);
  EXPECT_EQ(std::memcmp(rows->data(), values.data() + 8, 12 * 4), 0);
  EXPECT_EQ(t->Rows<std::uint16_t>(0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->RowBytes(5, 11).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(t->RowBytes(6, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(t->RowBytes(10, 10).ok());
  std::vector<float> out(3);
  EXPECT_EQ(t->ReadRowsF32(0, 1, out).code(), StatusCode::kInvalidArgument);
}

TEST(Table, VerifyNamesTheCorruptBlockAndRows) {
  std::string path = TempDir() + "/t.emb";
  ASSERT_TRUE(WriteTable(path, RandomMatrix(100, 4, 5), 4, DType::kF32, nullptr, 10).ok());
  std::uint64_t data_offset = (*Table::Open(path))->data_offset();
  // Flip one byte of row 57 (block 5, rows [50, 60)).
  int fd = ::open(path.c_str(), O_RDWR);
  std::uint64_t off = data_offset + 57 * 16 + 3;
  unsigned char b;
  ASSERT_EQ(::pread(fd, &b, 1, off), 1);
  b ^= 0x40;
  ASSERT_EQ(::pwrite(fd, &b, 1, off), 1);
  ::close(fd);

  auto t = Table::Open(path);
  ASSERT_TRUE(t.ok());  // checksums are verified on demand only
  EXPECT_TRUE((*t)->VerifyRows(0, 50).ok());
  EXPECT_TRUE((*t)->VerifyRows(60, 100).ok());
  Status st = (*t)->VerifyRows(55, 56);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("block 5 (rows [50, 60))"), std::string::npos) << st.message();
  EXPECT_EQ((*t)->VerifyAll().code(), StatusCode::kCorruption);
  EXPECT_EQ(Table::Open(path, {.verify = true}).status().code(), StatusCode::kCorruption);
}

TEST(Table, VerifyAllReportsProgressAndCanBeCancelled) {
  std::string path = TempDir() + "/t.emb";
  ASSERT_TRUE(WriteTable(path, RandomMatrix(1000, 64, 5), 64, DType::kF32, nullptr, 1).ok());
  auto t = *Table::Open(path);
  std::uint64_t last = 0;
  ASSERT_TRUE(t->VerifyAll([&](std::uint64_t done, std::uint64_t total) {
                 EXPECT_LE(done, total);
                 last = done;
                 return true;
               }).ok());
  EXPECT_EQ(last, 1000u * 64 * 4);
  EXPECT_EQ(t->VerifyAll([](std::uint64_t, std::uint64_t) { return false; }).code(),
            StatusCode::kCancelled);
}

TEST(Table, KeysWithUnicodeAndLookupMisses) {
  std::string path = TempDir() + "/t.emb";
  std::vector<std::string> keys = {"über", "日本", "a b", "x", "🙂"};
  ASSERT_TRUE(WriteTable(path, RandomMatrix(5, 2, 1), 2, DType::kF16, &keys).ok());
  auto t = *Table::Open(path);
  for (std::size_t r = 0; r < keys.size(); ++r) EXPECT_EQ(*t->FindKey(keys[r]), r);
  EXPECT_EQ(*t->FindKey("ü"), std::nullopt);
  EXPECT_EQ(*t->FindKey(""), std::nullopt);
}

// The file offset and size of tensor `name` of the table at `path` (docs/FORMAT.md).
std::pair<std::uint64_t, std::uint64_t> TensorBytes(const std::string& path, std::string_view name) {
  int fd = ::open(path.c_str(), O_RDONLY);
  std::uint64_t n = 0;
  EXPECT_EQ(::pread(fd, &n, 8, 0), 8);
  std::string json(n, '\0');
  EXPECT_EQ(::pread(fd, json.data(), n, 8), static_cast<ssize_t>(n));
  ::close(fd);
  auto offsets = nlohmann::json::parse(json)[std::string(name)]["data_offsets"];
  const std::uint64_t begin = offsets[0].get<std::uint64_t>();
  return {8 + n + begin, offsets[1].get<std::uint64_t>() - begin};
}

// Fills the key index of the table file in place with `slot` in every slot, as a writer that
// does not publish by rename might leave it.
void OverwriteKeyIndex(const std::string& path, std::uint64_t slot) {
  auto [offset, size] = TensorBytes(path, kTensorKeyIndex);
  std::vector<std::uint64_t> slots(size / 8, slot);
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_EQ(::pwrite(fd, slots.data(), size, static_cast<off_t>(offset)),
            static_cast<ssize_t>(size));
  ::close(fd);
}

// The index is read through the mapping after Open(): bytes rewritten in place since are
// Corruption naming the file, never a probe without end or a read past the key bytes.
TEST(Table, KeyLookupInAnIndexRewrittenInPlaceIsCorruption) {
  std::string path = TempDir() + "/t.emb";
  std::vector<std::string> keys = {"a", "b", "c", "d", "e"};
  ASSERT_TRUE(WriteTable(path, RandomMatrix(5, 2, 1), 2, DType::kF32, &keys).ok());
  auto t = *Table::Open(path);
  ASSERT_EQ(*t->FindKey("c"), 2u);

  OverwriteKeyIndex(path, 1000);  // rows past the table's 5
  auto past = t->FindKey("c");
  ASSERT_EQ(past.status().code(), StatusCode::kCorruption);
  EXPECT_NE(past.status().message().find("names row 1000 of 5 (the file changed after it was "
                                         "opened)"),
            std::string::npos)
      << past.status().message();
  EXPECT_NE(past.status().message().find("t.emb"), std::string::npos);

  OverwriteKeyIndex(path, 0);  // every slot filled, none empty: a probe must still end
  auto full = t->FindKey("no-such-key");
  ASSERT_EQ(full.status().code(), StatusCode::kCorruption);
  EXPECT_NE(full.status().message().find("keys.index has no empty slot"), std::string::npos)
      << full.status().message();
  EXPECT_EQ(*t->FindKey("a"), 0u);  // row 0's key is still where every slot points
}

TEST(Table, TableWithoutKeysAnswersNoKey) {
  std::string path = TempDir() + "/t.emb";
  ASSERT_TRUE(WriteTable(path, RandomMatrix(5, 2, 1), 2, DType::kF32, nullptr).ok());
  EXPECT_EQ(*(*Table::Open(path))->FindKey("x"), std::nullopt);
}

// A table whose matrix extends past 4 GiB, built as a sparse file (zero rows) so the test needs
// neither the disk space nor the time to write it. Checks 64-bit offsets end to end.
TEST(Table, ReadsPastFourGibibytes) {
  const std::uint64_t dim = 1024;
  const std::uint64_t rows = (5ull << 30) / (dim * 4) + 3;  // a little over 5 GiB
  const std::uint64_t block_rows = 256;                     // 1 MiB blocks
  const std::uint64_t blocks = (rows + block_rows - 1) / block_rows;
  const std::uint64_t matrix = rows * dim * 4;
  const std::uint64_t data_offset = 4096;

  std::vector<std::byte> zeros(block_rows * dim * 4);
  const std::uint64_t full = Checksum64(zeros);
  std::vector<std::uint64_t> sums(blocks, full);
  // The last row holds a marker value.
  float marker[dim];
  for (std::uint64_t i = 0; i < dim; ++i) marker[i] = static_cast<float>(i) + 0.5f;
  std::vector<std::byte> last_block((rows % block_rows) * dim * 4);
  std::memcpy(last_block.data() + last_block.size() - dim * 4, marker, dim * 4);
  sums.back() = Checksum64(last_block);

  HeaderContent h;
  h.metadata = {{"embstore.format", "embstore-table"},
                {"embstore.version", "1"},
                {"embstore.checksum", "xxh3-64"},
                {"embstore.block_rows", std::to_string(block_rows)}};
  h.tensors = {{"embedding", "F32", {rows, dim}, 0, matrix},
               {"checksums", "U64", {blocks}, matrix, matrix + blocks * 8}};
  std::string json = *SerializeHeader(h);
  std::string head(8, '\0');
  std::uint64_t n = data_offset - 8;
  std::memcpy(head.data(), &n, 8);
  head += json;
  head.resize(data_offset, ' ');

  std::string path = TempDir() + "/big.emb";
  int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  ASSERT_EQ(::pwrite(fd, marker, dim * 4, data_offset + matrix - dim * 4),
            static_cast<ssize_t>(dim * 4));
  ASSERT_EQ(::pwrite(fd, sums.data(), blocks * 8, data_offset + matrix),
            static_cast<ssize_t>(blocks * 8));
  ::close(fd);

  auto t = Table::Open(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->rows(), rows);
  EXPECT_GT((*t)->rows() * (*t)->row_bytes(), 4ull << 30);
  auto last = (*t)->Rows<float>(rows - 1, rows);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ((*last)[dim - 1], marker[dim - 1]);
  EXPECT_TRUE((*t)->VerifyRows(rows - 300, rows).ok());
  ::unlink(path.c_str());
}

TEST(Table, EveryReaderReportsAFileTruncatedUnderItInsteadOfCrashing) {
  std::string path = TempDir() + "/t.emb";
  auto keys = MakeKeys(4000);
  ASSERT_TRUE(WriteTable(path, RandomMatrix(4000, 64, 9), 64, DType::kF16, &keys, 100).ok());
  auto t = *Table::Open(path);
  ASSERT_TRUE(t->CheckIntact().ok());
  // Rewritten in place (not by rename) while mapped: the file keeps its first 8 KiB.
  ASSERT_EQ(::truncate(path.c_str(), 8192), 0);
  std::vector<float> out(4000 * 64);
  Status st = t->ReadRowsF32(0, 4000, out);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find(path + "': part of the file could not be read while it was mapped"),
            std::string::npos)
      << st.ToString();
  EXPECT_EQ(t->CheckIntact().code(), StatusCode::kCorruption);
  // Verification says the file was truncated, not merely that a checksum failed.
  st = t->VerifyRows(3000, 3100);
  EXPECT_NE(st.message().find("could not be read while it was mapped"), std::string::npos)
      << st.ToString();
  EXPECT_EQ(t->VerifyAll().code(), StatusCode::kCorruption);
  std::vector<float> f(64);
  EXPECT_EQ(t->ReadRowsF32(3999, 4000, f).code(), StatusCode::kCorruption);
}

// Flips one bit of the byte at file offset `off`.
void FlipByte(const std::string& path, std::uint64_t off) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(off)), 1);
  b ^= 0x08;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(off)), 1);
  ::close(fd);
}

TEST(Table, GatherNeverReturnsARowFromABlockThatFailsItsChecksum) {
  std::string path = TempDir() + "/t.emb";
  auto values = RandomMatrix(100, 4, 5);
  auto keys = MakeKeys(100);
  ASSERT_TRUE(WriteTable(path, values, 4, DType::kF32, &keys, 10).ok());
  FlipByte(path, (*Table::Open(path))->data_offset() + 57 * 16 + 2);  // block 5: rows [50, 60)
  auto t = *Table::Open(path);
  CopyOptions verify;
  verify.verify = true;
  std::vector<std::uint64_t> rows{3, 99, 3};
  std::vector<std::byte> out(3 * 16);
  ASSERT_TRUE(t->GatherRows(rows, out, verify).ok());
  EXPECT_EQ(std::memcmp(out.data(), values.data() + 3 * 4, 16), 0);
  EXPECT_EQ(std::memcmp(out.data() + 16, values.data() + 99 * 4, 16), 0);
  for (std::uint64_t bad_row : {50u, 57u, 59u}) {
    std::vector<std::uint64_t> one{bad_row};
    Status st = t->GatherRows(one, std::span<std::byte>(out).first(16), verify);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << bad_row;
    EXPECT_NE(st.message().find("checksum mismatch in block 5 (rows [50, 60))"),
              std::string::npos)
        << st.message();
  }
  std::vector<std::uint64_t> past{100};
  EXPECT_EQ(t->GatherRows(past, std::span<std::byte>(out).first(16)).code(),
            StatusCode::kOutOfRange);
}

TEST(Table, VerifyRowsOnceHashesABlockOnlyOncePerMapping) {
  std::string path = TempDir() + "/t.emb";
  ASSERT_TRUE(WriteTable(path, RandomMatrix(100, 4, 5), 4, DType::kF32, nullptr, 10).ok());
  auto t = *Table::Open(path);
  ASSERT_TRUE(t->VerifyRowsOnce(20, 25).ok());
  // Rewritten in place after the check (never done by embstore): the remembered block is not
  // hashed again, the others are.
  FlipByte(path, t->data_offset() + 22 * 16);
  FlipByte(path, t->data_offset() + 35 * 16);
  EXPECT_TRUE(t->VerifyRowsOnce(21, 22).ok());
  EXPECT_EQ(t->VerifyRows(21, 22).code(), StatusCode::kCorruption);
  EXPECT_EQ(t->VerifyRowsOnce(30, 40).code(), StatusCode::kCorruption);
}

TEST(Table, KeysCarryChecksumsThatVerifyChecks) {
  std::string path = TempDir() + "/t.emb";
  auto keys = MakeKeys(200);
  ASSERT_TRUE(WriteTable(path, RandomMatrix(200, 4, 5), 4, DType::kF32, &keys, 10).ok());
  {
    auto t = *Table::Open(path);
    EXPECT_EQ(t->format_version(), 2);
    EXPECT_TRUE(t->keys_checksummed());
    EXPECT_TRUE(t->VerifyKeys().ok());
    EXPECT_TRUE(t->VerifyAll().ok());
  }
  // One flipped bit in the key bytes: the offsets and index still validate, so Open succeeds,
  // but the keys fail their checksum.
  auto opened = *Table::Open(path);
  const std::uint64_t last_key_byte = opened->file_size() - 3 * 8 - 1;
  FlipByte(path, last_key_byte);
  auto t = *Table::Open(path);
  Status st = t->VerifyKeys();
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("checksum mismatch in keys.bytes"), std::string::npos)
      << st.message();
  EXPECT_EQ(t->VerifyAll().code(), StatusCode::kCorruption);
  // A table without keys stays at version 1: readers that predate key checksums read it.
  std::string plain = TempDir() + "/p.emb";
  ASSERT_TRUE(WriteTable(plain, RandomMatrix(20, 4, 5), 4, DType::kF32, nullptr).ok());
  EXPECT_EQ((*Table::Open(plain))->format_version(), 1);
}

TEST(Table, HostileShapesAreRejectedBeforeAnyArithmeticWraps) {
  // [0, 2^62] F32: the matrix spans 0 bytes, but a row would be 2^64 bytes, which wraps to 0.
  for (auto [rows, dim] : {std::pair<std::uint64_t, std::uint64_t>{0, 1ull << 62},
                           {1ull << 40, 1ull << 24}, {~0ull, 1}, {5, 0}}) {
    auto g = ComputeGeometry(rows, dim, 4, 16, "t");
    EXPECT_FALSE(g.ok()) << rows << " x " << dim;
  }
  auto g = ComputeGeometry(10, 3, 2, ~0ull, "t");  // huge block_rows: one block
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->num_blocks, 1u);
  EXPECT_EQ(g->block_bytes, 60u);
}

}  // namespace
}  // namespace embstore::store
