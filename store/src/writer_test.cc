#include "embstore/store/writer.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>

#include "embstore/store/checksum.h"
#include "embstore/store/format.h"
#include "embstore/store/table.h"
#include "test_util.h"

namespace embstore::store {
namespace {

using testing::MakeKeys;
using testing::ReadFile;
using testing::RandomMatrix;
using testing::TempDir;
using testing::WriteFile;
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
      ASSERT_EQ(*(*t)->FindKey(keys[r]), r);
    }
    EXPECT_EQ(*(*t)->FindKey("no-such-key"), std::nullopt);
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

// A write that fails on the writer's own thread (here RLIMIT_FSIZE: EFBIG past 6 MiB, as a
// full disk fails with ENOSPC) surfaces from a later AppendRows or from Finish, names the
// temporary file, and leaves nothing behind. In a child process, which the limit must not
// outlive.
// Appends of 1 MiB go through the writer's buffer; appends of 5 MiB are written straight from
// the caller's memory on the write-behind thread while the caller hashes them.
class WriteBehindFailure : public ::testing::TestWithParam<int> {};

TEST_P(WriteBehindFailure, SurfacesAndLeavesNothing) {
  const std::string dir = TempDir();
  const std::string path = dir + "/t.emb";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{6u << 20, 6u << 20};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) _exit(10);
    auto w = TableWriter::Create(path, Opts(256));
    if (!w.ok()) _exit(11);
    const std::vector<float> rows = RandomMatrix(1024 * GetParam(), 256, 5);  // GetParam() MiB
    Status st;
    for (int i = 0; i < 32 && st.ok(); ++i) st = (*w)->AppendRows(std::as_bytes(std::span(rows)));
    if (st.ok()) st = (*w)->Finish();
    if (st.ok()) _exit(12);
    if (st.ToString().find("File too large") == std::string::npos) _exit(13);
    if (st.ToString().find(dir) == std::string::npos) _exit(14);
    if (CountEntries(dir) != 0) _exit(15);
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "10 setrlimit, 11 create, 12 no error, 13 not EFBIG, "
                                        "14 file not named, 15 files left";
  EXPECT_EQ(CountEntries(dir), 0);
}

INSTANTIATE_TEST_SUITE_P(Writer, WriteBehindFailure, ::testing::Values(1, 5),
                         [](const auto& param_info) { return std::to_string(param_info.param) + "MiB"; });

// Appends large enough to be written from the caller's memory, mixed with small ones that go
// through the buffer, and an append that ends inside a checksum block: the same table as one
// written a row at a time, every block checksum and row hash right. Whole blocks inside a large
// append are hashed in one call, the rest by the streaming hasher: both give the same checksums.
// A row-count hint (expected_rows: space reserved up front), right, too high or too low, changes
// nothing in the table, and what a too-high hint reserved is given back.
TEST(Writer, LargeAndSmallAppendsGiveTheSameTable) {
  const std::string dir = TempDir();
  const std::uint64_t dim = 64, rows = 70000;  // 17.1 MiB of f32
  const std::vector<float> v = RandomMatrix(rows, dim, 21);
  const auto bytes = std::as_bytes(std::span<const float>(v));
  const std::size_t rb = dim * 4;
  auto write = [&](const std::string& path, const std::vector<std::uint64_t>& sizes,
                   std::uint64_t expected_rows = 0, bool row_hashes = true) {
    WriterOptions o = Opts(dim);
    o.row_hashes = row_hashes;
    o.block_rows = 1000;
    o.expected_rows = expected_rows;
    auto w = TableWriter::Create(path, o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::uint64_t at = 0;
    for (std::size_t i = 0; at < rows; ++i) {
      const std::uint64_t n = std::min(rows - at, sizes[i % sizes.size()]);
      ASSERT_TRUE((*w)->AppendRows(bytes.subspan(at * rb, n * rb)).ok());
      at += n;
    }
    ASSERT_TRUE((*w)->Finish().ok());
  };
  write(dir + "/rows.emb", {1});
  auto one = Table::Open(dir + "/rows.emb", {.verify = true});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  std::vector<std::uint64_t> h1(rows);
  ASSERT_TRUE((*one)->RowHashes(0, rows, h1).ok());

  struct HintCase {
    const char* name;
    std::uint64_t expected_rows;
    bool row_hashes;
  };
  for (const HintCase& c : {HintCase{"mixed", 0, true}, HintCase{"hinted", rows, true},
                        HintCase{"hint-high", 2 * rows, true}, HintCase{"hint-low", rows / 3, true},
                        HintCase{"no-row-hashes", rows, false}}) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + "/" + c.name + ".emb";
    // 5 MiB and 4 MiB (exactly the buffer) appends between appends of one and three rows.
    write(path, {1, 20480, 3, 16384, 777}, c.expected_rows, c.row_hashes);
    auto mixed = Table::Open(path, {.verify = true});
    ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
    ASSERT_TRUE((*mixed)->VerifyAll().ok());
    const auto got = *(*mixed)->RowBytes(0, rows);
    ASSERT_EQ(std::memcmp(got.data(), bytes.data(), bytes.size()), 0);
    ASSERT_EQ((*mixed)->num_blocks(), (*one)->num_blocks());
    for (std::uint64_t b = 0; b < (*mixed)->num_blocks(); ++b) {
      EXPECT_EQ((*mixed)->BlockChecksum(b), (*one)->BlockChecksum(b)) << b;
    }
    if (c.row_hashes) {
      ASSERT_TRUE((*mixed)->VerifyRowHashes(0, rows).ok());
      std::vector<std::uint64_t> h(rows);
      ASSERT_TRUE((*mixed)->RowHashes(0, rows, h).ok());
      EXPECT_EQ(h, h1);
      for (std::uint64_t r = 0; r < rows; r += 997) {
        EXPECT_EQ(h[r], Checksum64(bytes.subspan(r * rb, rb))) << r;
      }
    }
    struct stat st;
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_LT(static_cast<std::uint64_t>(st.st_blocks) * 512,
              static_cast<std::uint64_t>(st.st_size) + (1u << 20))
        << "space reserved past the end was not given back";
  }
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

// Keys for rows [begin, end) of a test table: "k<row>".
std::vector<std::string> RowKeys(std::uint64_t begin, std::uint64_t end) {
  std::vector<std::string> keys;
  for (std::uint64_t r = begin; r < end; ++r) keys.push_back("k" + std::to_string(r));
  return keys;
}

Result<TableWriter::KeyedAppend> AppendKeyed(TableWriter* w, std::span<const float> values,
                                             const std::vector<std::string>& keys) {
  std::vector<std::string_view> views(keys.begin(), keys.end());
  return w->AppendKeyedRows(std::as_bytes(values), views);
}

TEST(Writer, LastDuplicateKeyOverwritesInPlaceAndKeepsChecksumsRight) {
  std::string path = TempDir() + "/t.emb";
  WriterOptions o;
  o.dim = 2;
  o.block_rows = 4;
  o.with_keys = true;
  o.on_duplicate_key = DuplicateKeyPolicy::kLast;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok());
  auto values = RandomMatrix(700000, 2, 3);
  auto a = AppendKeyed(w->get(), values, RowKeys(0, 700000));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->duplicates, 0u);
  // A batch that repeats the first and the last key around one new key.
  float again[6] = {100, 200, 7, 8, -1, -2};
  auto b = AppendKeyed(w->get(), again, {"k0", "new", "k699999"});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->duplicates, 2u);
  EXPECT_FALSE(b->refused.has_value());
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = Table::Open(path, {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ((*t)->rows(), 700001u);
  EXPECT_EQ((*(*t)->Rows<float>(0, 1))[1], 200.0f);
  EXPECT_EQ((*(*t)->Rows<float>(699999, 700000))[0], -1.0f);
  EXPECT_EQ((*(*t)->Rows<float>(700000, 700001))[0], 7.0f);
}

TEST(Writer, FirstDuplicateKeyIsDropped) {
  std::string path = TempDir() + "/t.emb";
  WriterOptions o = Opts(2);
  o.with_keys = true;
  o.on_duplicate_key = DuplicateKeyPolicy::kFirst;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok());
  float v[8] = {1, 1, 2, 2, 3, 3, 4, 4};
  auto a = AppendKeyed(w->get(), v, {"a", "b", "a", "c"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->duplicates, 1u);
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = Table::Open(path, {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_EQ((*t)->rows(), 3u);
  EXPECT_EQ((*(*t)->Rows<float>(0, 1))[0], 1.0f);
  EXPECT_EQ((*(*t)->Rows<float>(2, 3))[0], 4.0f);
}

TEST(Writer, RefusedDuplicateKeySaysWhichRowsAndKeepsTheRowsBefore) {
  std::string dir = TempDir();
  WriterOptions o = Opts(2);
  o.with_keys = true;
  auto w = TableWriter::Create(dir + "/t.emb", o);
  ASSERT_TRUE(w.ok());
  // Enough keys to make the live index grow several times first.
  auto values = RandomMatrix(5000, 2, 4);
  ASSERT_TRUE(AppendKeyed(w->get(), values, RowKeys(0, 5000)).ok());
  float v[6] = {1, 1, 2, 2, 3, 3};
  auto a = AppendKeyed(w->get(), v, {"x", "k4321", "y"});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(a->refused.has_value());
  EXPECT_EQ(a->refused->index, 1u);
  EXPECT_EQ(a->refused->first_row, 4321u);
  EXPECT_EQ((*w)->rows(), 5001u);  // "x" went in, nothing after the refused key
  (*w)->Abort();
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(Writer, KeyedRowsNeedAKeyedWriterAndOneKeyARow) {
  std::string dir = TempDir();
  auto w = TableWriter::Create(dir + "/t.emb", Opts(2));
  ASSERT_TRUE(w.ok());
  float row[2] = {1, 2};
  auto a = AppendKeyed(w->get(), row, {"a"});
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(CountEntries(dir), 0);

  WriterOptions o = Opts(2);
  o.with_keys = true;
  auto k = TableWriter::Create(dir + "/k.emb", o);
  ASSERT_TRUE(k.ok());
  auto b = AppendKeyed(k->get(), row, {"a", "b"});
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("2 keys for 8 bytes"), std::string::npos)
      << b.status().message();
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(WriterRowHashes, StoredHashesAreEachRowsXxh3AndVersion3) {
  const std::string dir = TempDir();
  const std::string path = dir + "/h.emb";
  WriterOptions o;
  o.dim = 3;
  o.row_hashes = true;
  o.block_rows = 4;
  o.with_keys = true;
  o.on_duplicate_key = DuplicateKeyPolicy::kLast;
  auto w = TableWriter::Create(path, o);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::vector<float> v(30);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  std::vector<std::string_view> keys{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  ASSERT_TRUE((*w)->AppendKeyedRows(std::as_bytes(std::span<const float>(v)), keys).ok());
  // A repeated key under kLast rewrites row 1 in place: its stored hash follows.
  std::vector<float> again{9, 9, 9};
  std::vector<std::string_view> b{"b"};
  ASSERT_TRUE((*w)->AppendKeyedRows(std::as_bytes(std::span<const float>(again)), b).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = Table::Open(path, {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->format_version(), 3);
  ASSERT_TRUE((*t)->has_row_hashes());
  std::vector<std::uint64_t> got(10);
  ASSERT_TRUE((*t)->RowHashes(0, 10, got).ok());
  for (std::uint64_t r = 0; r < 10; ++r) {
    auto row = *(*t)->RowBytes(r, r + 1);
    EXPECT_EQ(got[r], Checksum64(row)) << r;
  }
  std::vector<float> row1(3);
  std::memcpy(row1.data(), (*(*t)->RowBytes(1, 2)).data(), 12);
  EXPECT_EQ(row1[0], 9.0f);
  // The checksum of the final row hashes (row 1's rewritten one included) is stored with them.
  EXPECT_EQ((*t)->metadata().at(std::string(kMetaRowHashesChecksum)),
            ContentIdHex(Checksum64(std::as_bytes(std::span<const std::uint64_t>(got)))));
  auto checked = (*t)->CheckRowHashesChecksum();
  ASSERT_TRUE(checked.ok()) << checked.status().ToString();
  EXPECT_TRUE(*checked);
}

TEST(WriterRowHashes, TheirChecksumCatchesAChangedHashAndIsOptional) {
  const std::string dir = TempDir();
  const std::string path = dir + "/h.emb";
  WriterOptions o = Opts(4);
  o.row_hashes = true;
  {
    auto w = TableWriter::Create(path, o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendRowsF32(RandomMatrix(100, 4, 3)).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  std::uint64_t at = 0;  // where row 7's stored hash lies in the file
  {
    auto t = Table::Open(path);
    ASSERT_TRUE(t.ok());
    const std::uint64_t h = (*t)->StoredRowHash(7);
    std::string bytes = ReadFile(path);
    at = bytes.find(std::string(reinterpret_cast<const char*>(&h), 8));
    ASSERT_NE(at, std::string::npos);
  }
  {
    std::string bytes = ReadFile(path);
    bytes[at + 3] ^= 0x10;
    WriteFile(path, bytes);
  }
  auto t = Table::Open(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();  // opening does not read them
  auto checked = (*t)->CheckRowHashesChecksum();
  ASSERT_EQ(checked.status().code(), StatusCode::kCorruption);
  EXPECT_NE(checked.status().message().find("row hashes do not match their checksum"),
            std::string::npos) << checked.status().message();
  EXPECT_NE(checked.status().message().find(path), std::string::npos);
  // Tables without row hashes, and those written before the checksum existed, have none.
  o.row_hashes = false;
  {
    auto w = TableWriter::Create(dir + "/plain.emb", o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendRowsF32(RandomMatrix(10, 4, 3)).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto plain = Table::Open(dir + "/plain.emb");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->metadata().count(std::string(kMetaRowHashesChecksum)));
  EXPECT_FALSE(*(*plain)->CheckRowHashesChecksum());
  const std::string here = __FILE__;
  const std::string golden =
      here.substr(0, here.rfind("/store/src/")) + "/tests/data/golden_v3_bf16.emb";
  auto old = Table::Open(golden);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  ASSERT_TRUE((*old)->has_row_hashes());
  EXPECT_FALSE(*(*old)->CheckRowHashesChecksum());
}

// The matrix of another table moved in by the kernel, a few rows patched, checksums and row hashes
// given by the caller: the result is the table an ordinary writer makes of the same rows. The
// source's data offset differs from the new file's (its header holds more metadata), and its row
// count is not a multiple of the block or of a page. EMBSTORE_TEST_REFLINK_DIR names a directory on
// a filesystem that reflinks (XFS, btrfs) where the extents must be shared; elsewhere the kernel
// copies them.
// `calls(data_offset)` gives the PatchRows calls, (first row, rows), in order.
using PatchPlan = std::function<std::vector<std::pair<std::uint64_t, std::uint64_t>>(
    std::uint64_t data_offset)>;

void MatrixFromCase(const std::string& dir, bool must_share, std::uint64_t rows, std::uint64_t dim,
                    const PatchPlan& calls) {
  const std::uint64_t br = 64;
  auto values = RandomMatrix(rows, dim, 21);
  WriterOptions src_o = Opts(dim);
  src_o.block_rows = 1000;
  for (int i = 0; i < 300; ++i) src_o.metadata["k" + std::to_string(i)] = std::string(20, 'x');
  {
    auto w = TableWriter::Create(dir + "/old.emb", src_o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendRowsF32(values).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  WriterOptions o = Opts(dim);
  o.block_rows = br;
  o.row_hashes = true;
  std::uint64_t data_offset = 0;
  {
    auto probe = TableWriter::Create(dir + "/probe.emb", o);
    ASSERT_TRUE(probe.ok());
    ASSERT_TRUE((*probe)->AppendRowsF32(std::span<const float>(values).first(dim)).ok());
    ASSERT_TRUE((*probe)->Finish().ok());
    auto t = Table::Open(dir + "/probe.emb");
    ASSERT_TRUE(t.ok());
    data_offset = (*t)->data_offset();
  }
  std::remove((dir + "/probe.emb").c_str());
  const auto plan = calls(data_offset);
  auto expected = values;
  for (const auto& [first, n] : plan) {
    for (std::uint64_t r = first; r < first + n; ++r) {
      expected[r * dim + 1] += 1.5f;  // the row's head and tail: either may cross a block
      expected[r * dim + dim - 1] -= 2.5f;
    }
  }
  {
    auto w = TableWriter::Create(dir + "/ref.emb", o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendRowsF32(expected).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  auto old = Table::Open(dir + "/old.emb");
  auto ref = Table::Open(dir + "/ref.emb", {.verify = true});
  ASSERT_TRUE(old.ok() && ref.ok());
  ASSERT_NE((*old)->data_offset(), (*ref)->data_offset());
  std::vector<std::uint64_t> sums((*ref)->num_blocks()), hashes(rows);
  for (std::uint64_t b = 0; b < sums.size(); ++b) sums[b] = (*ref)->BlockChecksum(b);
  ASSERT_TRUE((*ref)->RowHashes(0, rows, hashes).ok());

  auto w = TableWriter::Create(dir + "/new.emb", o);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(
      (*w)->AppendMatrixFrom((*old)->fd(), (*old)->data_offset(), rows, sums, hashes).ok());
  if (must_share) {
    EXPECT_TRUE((*w)->matrix_shared());
  }
  ASSERT_EQ((*ref)->data_offset(), data_offset);
  for (const auto& [first, n] : plan) {
    ASSERT_TRUE((*w)->PatchRows(first, *(*ref)->RowBytes(first, first + n)).ok()) << first;
  }
  ASSERT_TRUE((*w)->Finish().ok());
  auto t = Table::Open(dir + "/new.emb", {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE((*t)->VerifyRowHashes(0, rows).ok());
  EXPECT_EQ(ContentId(**t), ContentId(**ref));
  const auto got = *(*t)->RowBytes(0, rows);
  const auto want = *(*ref)->RowBytes(0, rows);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
  // The old file is untouched (shared extents are copied on write).
  const auto before = std::as_bytes(std::span<const float>(values));
  const auto old_rows = *(*old)->RowBytes(0, rows);
  EXPECT_EQ(std::memcmp(old_rows.data(), before.data(), before.size()), 0);
}

// A few rows, one of them out of order (in a block written already: over shared extents it goes
// out as it is), and the last row.
std::vector<std::pair<std::uint64_t, std::uint64_t>> FewRows(std::uint64_t) {
  return {{0, 1}, {3, 1}, {500, 3}, {2, 1}, {69999, 1}};
}

// 68-byte rows, so rows straddle 4 KiB blocks. A run of rows long enough to be written at once
// (4 MiB), then the row that straddles the end of the last block that run wrote, then the next
// row: its block must not bring back the old bytes of the straddling row's tail.
std::vector<std::pair<std::uint64_t, std::uint64_t>> StraddlingRows(std::uint64_t data_offset) {
  const std::uint64_t row = 17 * 4, fs_block = 4096;
  std::uint64_t n = (4u << 20) / row;
  // Grow the run until the row after it starts in its last block and ends past it.
  for (;; ++n) {
    const std::uint64_t end = data_offset + n * row;
    const std::uint64_t block_end = (end + fs_block - 1) / fs_block * fs_block;
    if (end % fs_block != 0 && end + row > block_end) {
      return {{0, n}, {n, 1}, {n + 1, 1}, {n + 40, 2}};
    }
  }
}

TEST(WriterMatrixFrom, MakesTheTableAnOrdinaryWriterWould) {
  MatrixFromCase(TempDir(), false, 70001, 5, FewRows);
  MatrixFromCase(TempDir(), false, 70001, 17, StraddlingRows);
}

// An XFS filesystem with reflinks on a loop device, made for the test where it can be (root,
// mkfs.xfs, loop devices: CI here); removed when the test ends.
class XfsLoopMount {
 public:
  XfsLoopMount() {
    if (::geteuid() != 0) {
      why_ = "not root";
      return;
    }
    const std::string base = TempDir();
    image_ = base + "/xfs.img";
    dir_ = base + "/mnt";
    ::mkdir(dir_.c_str(), 0755);
    // Sparse: the 320 MB XFS asks for at least costs what the test writes.
    const std::string make = "truncate -s 320M '" + image_ + "' && mkfs.xfs -q -f -m reflink=1 '" +
                             image_ + "' >/dev/null 2>&1";
    if (std::system(make.c_str()) != 0) {
      why_ = "mkfs.xfs failed or is not installed";
      return;
    }
    if (std::system(("mount -o loop '" + image_ + "' '" + dir_ + "' 2>/dev/null").c_str()) != 0) {
      why_ = "cannot mount a loop device here";
      return;
    }
    mounted_ = true;
  }
  ~XfsLoopMount() {
    if (mounted_) (void)std::system(("umount '" + dir_ + "'").c_str());
    if (!image_.empty()) std::remove(image_.c_str());
  }
  bool ok() const { return mounted_; }
  const std::string& dir() const { return dir_; }
  const std::string& why() const { return why_; }

 private:
  std::string image_, dir_, why_;
  bool mounted_ = false;
};

TEST(WriterMatrixFrom, SharesExtentsWhereTheFilesystemReflinks) {
  // EMBSTORE_TEST_REFLINK_DIR names a directory on XFS or btrfs; else an XFS loop mount is made.
  std::optional<XfsLoopMount> xfs;
  std::string dir;
  if (const char* given = std::getenv("EMBSTORE_TEST_REFLINK_DIR")) {
    dir = given;
  } else {
    xfs.emplace();
    if (!xfs->ok()) {
      GTEST_SKIP() << "no filesystem that reflinks: EMBSTORE_TEST_REFLINK_DIR is not set and "
                   << "an XFS loop mount cannot be made (" << xfs->why() << ")";
    }
    dir = xfs->dir();
  }
  const std::string sub = dir + "/writer-matrix-from";
  ::mkdir(sub.c_str(), 0755);
  for (const auto& [dim, plan] :
       {std::pair{5, PatchPlan(FewRows)}, {17, PatchPlan(StraddlingRows)}}) {
    MatrixFromCase(sub, true, 70001, dim, plan);
    for (const char* f : {"/old.emb", "/ref.emb", "/new.emb"}) std::remove((sub + f).c_str());
  }
  // The old file truncated underneath: the rows around a changed one cannot be read. The error
  // names the table and says so, and the new file never appears.
  {
    const std::uint64_t rows = 5000, dim = 16;
    ASSERT_TRUE(WriteTable(sub + "/old.emb", RandomMatrix(rows, dim, 3), dim, DType::kF32,
                           nullptr, 64)
                    .ok());
    auto old = Table::Open(sub + "/old.emb");
    ASSERT_TRUE(old.ok());
    WriterOptions o = Opts(dim);
    o.block_rows = 64;
    o.row_hashes = true;
    auto w = TableWriter::Create(sub + "/new.emb", o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendMatrixFrom((*old)->fd(), (*old)->data_offset(), rows,
                                       std::vector<std::uint64_t>((*old)->num_blocks()),
                                       std::vector<std::uint64_t>(rows))
                    .ok());
    ASSERT_TRUE((*w)->matrix_shared());
    ASSERT_EQ(::truncate((sub + "/old.emb").c_str(),
                         static_cast<off_t>((*old)->data_offset() + 100 * dim * 4)),
              0);
    const std::vector<std::byte> row(dim * 4, std::byte{7});
    Status st = (*w)->PatchRows(4000, row);
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find("new.emb"), std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("read the rows around a changed one from the old file"),
              std::string::npos) << st.ToString();
    EXPECT_NE(st.ToString().find("truncated underneath"), std::string::npos) << st.ToString();
    EXPECT_FALSE((*w)->Finish().ok());
    w->reset();
    old->reset();
    EXPECT_EQ(CountEntries(sub), 1);  // old.emb: nothing of new.emb, no temporary file
    std::remove((sub + "/old.emb").c_str());
  }
  ::rmdir(sub.c_str());
}

TEST(WriterMatrixFrom, RefusesMisuseAndLeavesNothingBehind) {
  const std::string dir = TempDir();
  auto values = RandomMatrix(100, 4, 2);
  ASSERT_TRUE(WriteTable(dir + "/old.emb", values, 4, DType::kF32, nullptr, 10).ok());
  auto old = Table::Open(dir + "/old.emb");
  ASSERT_TRUE(old.ok());
  const int entries = CountEntries(dir);
  WriterOptions o = Opts(4);
  o.block_rows = 10;
  std::vector<std::uint64_t> sums(10);
  {  // PatchRows needs a given matrix
    auto w = TableWriter::Create(dir + "/a.emb", o);
    ASSERT_TRUE(w.ok());
    Status st = (*w)->PatchRows(0, *(*old)->RowBytes(0, 1));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  }
  {  // one checksum a block
    auto w = TableWriter::Create(dir + "/a.emb", o);
    ASSERT_TRUE(w.ok());
    Status st = (*w)->AppendMatrixFrom((*old)->fd(), (*old)->data_offset(), 100,
                                       std::vector<std::uint64_t>(9), {});
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  }
  {  // no appends after it
    auto w = TableWriter::Create(dir + "/a.emb", o);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->AppendMatrixFrom((*old)->fd(), (*old)->data_offset(), 100, sums, {}).ok());
    Status st = (*w)->AppendRows(*(*old)->RowBytes(0, 1));
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  }
  {  // a source shorter than the rows asked for (truncated underneath)
    auto w = TableWriter::Create(dir + "/a.emb", o);
    ASSERT_TRUE(w.ok());
    Status st = (*w)->AppendMatrixFrom((*old)->fd(), (*old)->file_size() - 400, 100, sums, {});
    EXPECT_EQ(st.code(), StatusCode::kIOError) << st.ToString();
    EXPECT_NE(st.message().find("a.emb"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find("early"), std::string::npos) << st.ToString();
  }
  {  // the fd of no file
    auto w = TableWriter::Create(dir + "/a.emb", o);
    ASSERT_TRUE(w.ok());
    Status st = (*w)->AppendMatrixFrom(-1, 0, 100, sums, {});
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("a.emb"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(CountEntries(dir), entries);
}

// An adopted spare (TableWriter::Adopt): its matrix is written in place and the file swapped in;
// a header of another size, and any way of giving rows but MatrixInPlace, are refused.
TEST(Writer, AnAdoptedSpareIsPatchedInPlaceOrRefused) {
  const std::string dir = TempDir();
  const std::string path = dir + "/t.emb", spare = dir + "/.t.emb.spare";
  const auto current = RandomMatrix(100, 4, 3), older = RandomMatrix(100, 4, 4);
  ASSERT_TRUE(WriteTable(path, current, 4, DType::kF32, nullptr, 10).ok());
  ASSERT_TRUE(WriteTable(spare, older, 4, DType::kF32, nullptr, 10).ok());
  const std::string current_file = ReadFile(path), spare_file = ReadFile(spare);
  std::uint64_t at = 0;
  {
    auto t = Table::Open(spare);
    ASSERT_TRUE(t.ok());
    at = (*t)->data_offset();
  }
  WriterOptions o = Opts(4);
  o.block_rows = 10;
  o.overwrite = true;
  o.metadata["note"] = "test";
  auto adopt = [&](std::uint64_t offset) {
    auto f = AtomicFile::AdoptSpare(path, spare);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return TableWriter::Adopt(path, o, std::move(*f), offset);
  };
  auto elsewhere = adopt(at + 4096);
  ASSERT_FALSE(elsewhere.ok());
  EXPECT_EQ(elsewhere.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(elsewhere.status().message().find("'" + spare + "' holds its matrix at byte " +
                                               std::to_string(at + 4096)),
            std::string::npos) << elsewhere.status().ToString();
  std::vector<std::uint64_t> sums(10);
  {
    auto w = adopt(at);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    Status st = (*w)->AppendRowsF32(current);
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find("adopted spare"), std::string::npos) << st.ToString();
  }
  {
    auto w = adopt(at);
    ASSERT_TRUE(w.ok());
    auto t = Table::Open(path);
    ASSERT_TRUE(t.ok());
    Status st = (*w)->AppendMatrixFrom((*t)->fd(), (*t)->data_offset(), 100, sums, {});
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find("patched in place"), std::string::npos) << st.ToString();
  }
  {
    auto w = TableWriter::Create(dir + "/other.emb", o);
    ASSERT_TRUE(w.ok());
    Status st = (*w)->MatrixInPlace(100, sums, {});
    EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(st.message().find("needs an adopted spare"), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(ReadFile(path), current_file);  // refused: neither file touched
  EXPECT_EQ(ReadFile(spare), spare_file);
  // The spare patched into `current`'s rows 0-9, the rest its own; swapped in.
  std::vector<float> want = older;
  std::copy(current.begin(), current.begin() + 40, want.begin());
  const auto bytes = std::as_bytes(std::span(want));
  for (std::uint64_t b = 0; b < 10; ++b) sums[b] = Checksum64(bytes.subspan(b * 160, 160));
  auto w = adopt(at);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->MatrixInPlace(100, sums, {}).ok());
  ASSERT_TRUE((*w)->PatchRows(0, bytes.subspan(0, 160)).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  auto got = Table::Open(path);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE((*got)->VerifyRows(0, 100).ok());
  auto rows = (*got)->RowBytes(0, 100);
  ASSERT_TRUE(rows.ok());
  EXPECT_TRUE(std::equal(rows->begin(), rows->end(), bytes.begin()));
  auto kept = Table::Open(spare);
  ASSERT_TRUE(kept.ok());
  auto old_rows = (*kept)->RowBytes(0, 100);
  ASSERT_TRUE(old_rows.ok());
  EXPECT_TRUE(std::equal(old_rows->begin(), old_rows->end(),
                         std::as_bytes(std::span(current)).begin()));
}

}  // namespace
}  // namespace embstore::store
