#include "embstore/store/writer.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>

#include "embstore/store/format.h"
#include "embstore/store/table.h"
#include "test_util.h"

namespace embstore::store {
namespace {

using testing::MakeKeys;
using testing::RandomMatrix;
using testing::TempDir;
using testing::WriteTable;

WriterOptions Opts(std::uint64_t dim, DType dtype = DType::kF32) {
  WriterOptions o;
  o.dim = dim;
  o.dtype = dtype;
  return o;
}

int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.' || (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))) ++n;
  }
  closedir(d);
  return n;
}

struct Case {
  DType dtype;
  std::uint64_t rows;
  std::uint64_t dim;
  bool keys;
};

// Readable test names: "F16_77x5_keys".
std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  const Case& c = info.param;
  return std::string(DTypeName(c.dtype)) + "_" + std::to_string(c.rows) + "x" +
         std::to_string(c.dim) + (c.keys ? "_keys" : "");
}

class RoundTrip : public ::testing::TestWithParam<Case> {};

TEST_P(RoundTrip, ReadsBackWhatWasWritten) {
  const Case c = GetParam();
  std::string path = TempDir() + "/t.emb";
  auto values = RandomMatrix(c.rows, c.dim, 7);
  auto keys = MakeKeys(c.rows);
  ASSERT_TRUE(WriteTable(path, values, c.dim, c.dtype, c.keys ? &keys : nullptr, 3).ok());

  auto t = Table::Open(path, {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->rows(), c.rows);
  EXPECT_EQ((*t)->dim(), c.dim);
  EXPECT_EQ((*t)->dtype(), c.dtype);
  EXPECT_EQ((*t)->data_offset() % kDataAlignment, 0u);
  EXPECT_EQ((*t)->block_rows(), 3u);
  EXPECT_EQ((*t)->num_blocks(), (c.rows + 2) / 3);
  EXPECT_EQ((*t)->user_metadata().at("note"), "test");
  EXPECT_EQ((*t)->metadata().at("embstore.format"), "embstore-table");

  std::vector<float> got(c.rows * c.dim);
  ASSERT_TRUE((*t)->ReadRowsF32(0, c.rows, got).ok());
  for (std::size_t i = 0; i < values.size(); ++i) {
    float want = values[i];
    if (c.dtype == DType::kF16) want = F16ToF32(F32ToF16(want));
    if (c.dtype == DType::kBF16) want = BF16ToF32(F32ToBF16(want));
    ASSERT_EQ(got[i], want) << "element " << i;
  }
  EXPECT_EQ((*t)->has_keys(), c.keys);
  if (c.keys) {
    for (std::uint64_t r = 0; r < c.rows; ++r) {
      ASSERT_EQ((*t)->Key(r), keys[r]);
      ASSERT_EQ((*t)->FindKey(keys[r]), r);
    }
    EXPECT_EQ((*t)->FindKey("no-such-key"), std::nullopt);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllDTypes, RoundTrip,
    ::testing::Values(Case{DType::kF32, 100, 16, false}, Case{DType::kF32, 100, 16, true},
                      Case{DType::kF16, 77, 5, false}, Case{DType::kF16, 77, 5, true},
                      Case{DType::kBF16, 64, 3, false}, Case{DType::kBF16, 64, 3, true},
                      Case{DType::kF32, 0, 8, false}, Case{DType::kF32, 0, 8, true},
                      Case{DType::kF16, 0, 1, true}, Case{DType::kF32, 1, 1, false},
                      Case{DType::kBF16, 1, 7, true}, Case{DType::kF16, 1, 300, false}),
    CaseName);

TEST(Writer, StreamsInManySmallAppends) {
  std::string path = TempDir() + "/t.emb";
  WriterOptions o;
  o.dim = 4;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok());
  auto values = RandomMatrix(5000, 4, 1);
  for (std::size_t r = 0; r < 5000; ++r) {
    ASSERT_TRUE((*w)->AppendRowsF32(std::span<const float>(values).subspan(r * 4, 4)).ok());
  }
  EXPECT_EQ((*w)->rows(), 5000u);
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = Table::Open(path, {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto rows = (*t)->Rows<float>(4999, 5000);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[3], values[4999 * 4 + 3]);
}

TEST(Writer, NothingUnderTheFinalNameUntilFinish) {
  std::string dir = TempDir();
  std::string path = dir + "/t.emb";
  WriterOptions o;
  o.dim = 2;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok());
  float row[2] = {1, 2};
  ASSERT_TRUE((*w)->AppendRowsF32(row).ok());
  struct stat st;
  EXPECT_NE(stat(path.c_str(), &st), 0);
  EXPECT_EQ(stat((*w)->temp_path().c_str(), &st), 0);
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(CountEntries(dir), 1);  // the temporary file is gone
}

TEST(Writer, AbortRemovesTheTemporaryFile) {
  std::string dir = TempDir();
  {
    WriterOptions o;
    o.dim = 2;
    auto w = TableWriter::Create(dir + "/t.emb", o);
    ASSERT_TRUE(w.ok());
    float row[2] = {1, 2};
    ASSERT_TRUE((*w)->AppendRowsF32(row).ok());
  }
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(Writer, RefusesToReplaceAnExistingFileUnlessAsked) {
  std::string path = TempDir() + "/t.emb";
  auto v1 = RandomMatrix(3, 2, 1);
  ASSERT_TRUE(WriteTable(path, v1, 2, DType::kF32, nullptr).ok());
  Status again = WriteTable(path, v1, 2, DType::kF32, nullptr);
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.message().find(path), std::string::npos);

  WriterOptions o;
  o.dim = 2;
  o.overwrite = true;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok());
  auto v2 = RandomMatrix(5, 2, 2);
  ASSERT_TRUE((*w)->AppendRowsF32(v2).ok());
  // Until Finish the old table is intact.
  ASSERT_EQ((*Table::Open(path))->rows(), 3u);
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ((*Table::Open(path))->rows(), 5u);
}

TEST(Writer, RejectsDuplicateKeysNamingBothRows) {
  std::string dir = TempDir();
  std::vector<std::string> keys = {"a", "b", "a"};
  Status st = WriteTable(dir + "/t.emb", RandomMatrix(3, 2, 1), 2, DType::kF32, &keys);
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  EXPECT_NE(st.message().find("duplicate key 'a' at rows 0 and 2"), std::string::npos)
      << st.message();
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(Writer, RejectsKeyCountMismatch) {
  std::string dir = TempDir();
  std::vector<std::string> keys = {"a", "b"};
  Status st = WriteTable(dir + "/t.emb", RandomMatrix(3, 2, 1), 2, DType::kF32, &keys);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("3 rows but 2 keys"), std::string::npos) << st.message();
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(Writer, RejectsBadOptions) {
  std::string dir = TempDir();
  WriterOptions o;
  EXPECT_EQ(TableWriter::Create(dir + "/t.emb", o).status().code(), StatusCode::kInvalidArgument);
  o.dim = 4;
  o.metadata["embstore.version"] = "9";
  auto r = TableWriter::Create(dir + "/t.emb", o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("reserved prefix"), std::string::npos);
  o.metadata.clear();
  o.metadata["bad"] = std::string("\xff\xfe", 2);
  EXPECT_EQ(TableWriter::Create(dir + "/t.emb", o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TableWriter::Create(dir + "/missing/t.emb", Opts(1)).status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(Writer, RejectsPartialRows) {
  std::string dir = TempDir();
  auto w = TableWriter::Create(dir + "/t.emb", Opts(3));
  ASSERT_TRUE(w.ok());
  float v[4] = {1, 2, 3, 4};
  Status st = (*w)->AppendRowsF32(v);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(Writer, OverflowPolicyErrorNamesRowAndColumn) {
  std::string dir = TempDir();
  auto w = TableWriter::Create(dir + "/t.emb", Opts(2, DType::kF16));
  ASSERT_TRUE(w.ok());
  float v[4] = {1, 2, 3, 1e6f};
  Status st = (*w)->AppendRowsF32(v, OverflowPolicy::kError);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("row 1, column 1"), std::string::npos) << st.message();
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(Writer, OverwriteRowsKeepsChecksumsRight) {
  std::string path = TempDir() + "/t.emb";
  WriterOptions o;
  o.dim = 2;
  o.block_rows = 4;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok());
  auto values = RandomMatrix(700000, 2, 3);
  ASSERT_TRUE((*w)->AppendRowsF32(values).ok());
  float first[2] = {100, 200};
  float last[2] = {-1, -2};
  ASSERT_TRUE((*w)->OverwriteRows(0, std::as_bytes(std::span<const float>(first))).ok());
  ASSERT_TRUE((*w)->OverwriteRows(699999, std::as_bytes(std::span<const float>(last))).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = Table::Open(path, {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*(*t)->Rows<float>(0, 1))[1], 200.0f);
  EXPECT_EQ((*(*t)->Rows<float>(699999, 700000))[0], -1.0f);
}

TEST(Writer, OverwritePastTheWrittenRowsFailsAndCleansUp) {
  std::string dir = TempDir();
  auto w = TableWriter::Create(dir + "/t.emb", Opts(2));
  ASSERT_TRUE(w.ok());
  float row[2] = {1, 2};
  ASSERT_TRUE((*w)->AppendRowsF32(row).ok());
  Status st = (*w)->OverwriteRows(1, std::as_bytes(std::span<const float>(row)));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("at row 1 of 1 written rows"), std::string::npos) << st.message();
  EXPECT_EQ((*w)->Finish().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(CountEntries(dir), 0);
}

}  // namespace
}  // namespace embstore::store
