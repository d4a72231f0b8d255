// s3:// locations through the resolver (OpenSource) against a real S3 server (testkit::S3Server,
// configured through the AWS_* variables as users configure it): a row range fetches only its
// blocks, keys and a prefix's table names, a replaced object, a corrupt block named by address;
// publishing a new version over an old one uploads its changed rows (objstore/delta.h), which a
// sync of a copy of the old version takes in one GET.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "embstore/client/open_source.h"
#include "embstore/client/update.h"
#include "embstore/objstore/delta.h"
#include "embstore/objstore/destination.h"
#include "embstore/objstore/s3.h"
#include "embstore/objstore/transfer.h"
#include "embstore/store/format.h"
#include "embstore/store/writer.h"
#include "embstore/testkit/s3_test_fixture.h"
#include "embstore/testkit/temp_dir.h"
#include "test_tables.h"

namespace embstore::client {
namespace {

using store::DType;

class ObjectSourceTest : public testkit::S3ServerTest {
 protected:
  void SetUp() override {
    S3ServerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ExportEnvironment();
    auto config = objstore::S3ConfigFromEnvironment();
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    s3_ = std::make_unique<objstore::S3Client>(*config);
    (void)s3_->CreateBucket("tables");  // already there after the first test
  }
  // Writes a table locally and uploads it as s3://tables/KEY; returns its row bytes.
  std::vector<std::byte> Upload(const std::string& key, std::uint64_t rows, std::uint64_t dim,
                                unsigned seed, bool keys = true) {
    const std::string path = dir_.File("up" + std::to_string(++uploads_) + ".emb");
    auto bytes = testing::WriteRandomTable(path, rows, dim, DType::kF32, keys, 1000, seed);
    objstore::TransferOptions o;
    o.overwrite = true;
    auto st = objstore::UploadFile(*s3_, path, {"s3", "tables", key}, o);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return bytes;
  }
  static SourceOptions Named(const std::string& table) {
    SourceOptions o;
    o.table = table;
    return o;
  }

  testkit::TempDir dir_{"objsrc"};
  int uploads_ = 0;
  std::unique_ptr<objstore::S3Client> s3_;
};

// Without keys: opening fetches the header and the checksums. (The keys are fetched at opening too,
// about 33 bytes a row: store::Table validates them when it opens the local copy.)
TEST_F(ObjectSourceTest, ARowRangeFetchesOnlyItsBlocks) {
  constexpr std::uint64_t kRows = 100000, kDim = 64;  // 25.6 MB of rows, blocks of 1000
  const auto want = Upload("seed/items.emb", kRows, kDim, 7, /*keys=*/false);
  auto src = OpenSource("s3://tables/seed/", Named("items"));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->kind(), "object");
  EXPECT_EQ((*src)->desc().name, "items");
  const std::uint64_t opened = (*src)->transferred_bytes();
  const std::uint64_t rb = kDim * 4;
  std::vector<std::byte> out(1000 * rb);
  auto stats = (*src)->CopyRows(0, 1000, out, {});
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_TRUE(std::equal(out.begin(), out.end(), want.begin()));
  EXPECT_EQ(stats->wire_bytes, 1000 * rb);  // exactly its one block
  EXPECT_EQ((*src)->transferred_bytes(), opened + 1000 * rb);
  // The opening (header, checksums, keys) and the block: under 2% of the object.
  EXPECT_LT((*src)->transferred_bytes(), kRows * rb / 50);
  // Whole blocks went straight into `out` and are not kept. Part of a block goes through the
  // local copy: block 0 is fetched into it once, and later reads of it fetch nothing.
  ASSERT_TRUE((*src)->CopyRows(10, 900, std::span(out).first(890 * rb), {}).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 890 * rb, want.begin() + 10 * rb));
  EXPECT_EQ((*src)->transferred_bytes(), opened + 2000 * rb);
  ASSERT_TRUE((*src)->CopyRows(20, 800, std::span(out).first(780 * rb), {}).ok());
  EXPECT_EQ((*src)->transferred_bytes(), opened + 2000 * rb);
  // A range across blocks 1..2 fetches just those two: block 1, cut, into the copy; block 2,
  // whole, straight into place.
  out.resize(1500 * rb);
  ASSERT_TRUE((*src)->CopyRows(1500, 3000, out, {}).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), want.begin() + 1500 * rb));
  EXPECT_EQ((*src)->transferred_bytes(), opened + 4000 * rb);
  // Once a block of the range is in the copy, the whole range is read through it.
  out.resize(2000 * rb);
  ASSERT_TRUE((*src)->CopyRows(1000, 3000, out, {}).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), want.begin() + 1000 * rb));
  EXPECT_EQ((*src)->transferred_bytes(), opened + 5000 * rb);
}

TEST_F(ObjectSourceTest, KeysAndKeyLookups) {
  const auto want = Upload("keyed/items.emb", 5000, 8, 3);
  auto src = OpenSource("s3://tables/keyed/items.emb");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto keys = (*src)->Keys(4998, 5000);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, (std::vector<std::string>{testing::TestKey(4998), testing::TestKey(4999)}));
  const std::uint64_t before = (*src)->transferred_bytes();
  const std::vector<std::string> ask = {testing::TestKey(4321), "absent"};
  std::vector<std::byte> out(2 * 32);
  auto got = (*src)->CopyKeys(ask, out, {});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->missing, std::vector<std::uint32_t>{1});
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 32, want.begin() + 4321 * 32));
  EXPECT_EQ((*src)->transferred_bytes(), before + 1000 * 32);  // the one block of row 4321
}

TEST_F(ObjectSourceTest, NamesAndPrefixes) {
  Upload("names/a.emb", 10, 4, 1);
  Upload("names/b.emb", 10, 4, 2);
  Upload("names/deeper/c.emb", 10, 4, 3);
  EXPECT_EQ(*ListTables("s3://tables/names/"), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(OpenSource("s3://tables/names", Named("b")).ok());  // PREFIX/NAME.emb
  EXPECT_TRUE(OpenSource("s3://tables/names/a.emb", Named("a")).ok());
  auto wrong = OpenSource("s3://tables/names/a.emb", Named("b"));
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("holds table 'a', not 'b'"), std::string::npos);
  auto unnamed = OpenSource("s3://tables/names/");
  EXPECT_EQ(unnamed.status().code(), StatusCode::kInvalidArgument);
  auto missing = OpenSource("s3://tables/names/", Named("zz"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("s3://tables/names/zz.emb"), std::string::npos);
}

TEST_F(ObjectSourceTest, AReplacedObjectIsNotMixedIn) {
  Upload("swap/t.emb", 5000, 16, 1);
  auto src = OpenSource("s3://tables/swap/t.emb");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  Upload("swap/t.emb", 5000, 16, 2);
  std::vector<std::byte> out(100 * 16 * 4);
  auto st = (*src)->CopyRows(0, 100, out, {});
  EXPECT_EQ(st.status().code(), StatusCode::kFailedPrecondition) << st.status().ToString();
  EXPECT_NE(st.status().message().find("s3://tables/swap/t.emb"), std::string::npos);
}

TEST_F(ObjectSourceTest, ACorruptBlockIsNamedByItsAddress) {
  const std::string path = dir_.File("bad.emb");
  testing::WriteRandomTable(path, 4000, 8, DType::kF32, false, 1000, 5);
  auto t = store::Table::Open(path);
  ASSERT_TRUE(t.ok());
  const std::uint64_t at = (*t)->data_offset() + 2500 * 32;  // in block 2
  t->reset();
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
  }
  objstore::TransferOptions o;
  o.overwrite = true;
  o.verify = false;
  ASSERT_TRUE(objstore::UploadFile(*s3_, path, {"s3", "tables", "bad/t.emb"}, o).ok());
  auto src = OpenSource("s3://tables/bad/t.emb");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  std::vector<std::byte> out(1000 * 32);
  EXPECT_TRUE((*src)->CopyRows(1000, 2000, out, {}).ok());
  auto st = (*src)->CopyRows(2000, 3000, out, {});
  EXPECT_EQ(st.status().code(), StatusCode::kCorruption);
  EXPECT_NE(st.status().message().find("s3://tables/bad/t.emb"), std::string::npos)
      << st.status().ToString();
  EXPECT_NE(st.status().message().find("block 2"), std::string::npos) << st.status().ToString();
}

// Publishes `m` (rows x dim F32, row hashes unless told) as s3://tables/KEY through
// TableDestination, as the writers do; returns what it said of the delta.
objstore::TableDestination::Delta Publish(const std::string& key, const std::vector<float>& m,
                                          std::uint64_t dim, bool row_hashes = true) {
  auto dest = objstore::TableDestination::Open("s3://tables/" + key, true, "test");
  EXPECT_TRUE(dest.ok()) << dest.status().ToString();
  if (!dest.ok()) return {};
  store::WriterOptions w;
  w.dim = dim;
  w.row_hashes = row_hashes;
  w.block_rows = 1000;
  auto writer = store::TableWriter::Create((*dest)->local_path(), w);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->AppendRowsF32(m).ok());
  EXPECT_TRUE((*writer)->Finish().ok());
  auto up = (*dest)->Publish();
  EXPECT_TRUE(up.ok()) << up.status().ToString();
  return (*dest)->delta();
}

TEST_F(ObjectSourceTest, AVersionPublishedOverAnotherCarriesItsChangedRows) {
  constexpr std::uint64_t kRows = 20000, kDim = 32;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  std::vector<float> v1(kRows * kDim);
  for (float& x : v1) x = normal(rng);
  auto d = Publish("delta/t.emb", v1, kDim);
  EXPECT_EQ(d.rows, 0u);
  EXPECT_EQ(d.skipped, "no earlier version");

  // 1% of the rows changed, at random ids.
  std::vector<float> v2 = v1;
  std::vector<std::uint64_t> changed;
  for (std::uint64_t r = 0; r < kRows; ++r) {
    if (rng() % 100 == 0) {
      changed.push_back(r);
      v2[r * kDim] += 1;
    }
  }
  d = Publish("delta/t.emb", v2, kDim);
  EXPECT_EQ(d.rows, changed.size()) << d.skipped;
  EXPECT_GT(d.bytes, changed.size() * kDim * 4);
  // The delta is a table of those rows, in order, naming both versions.
  ASSERT_TRUE(objstore::DownloadTable(*s3_, {"s3", "tables", "delta/t.emb.delta"},
                                      dir_.File("delta.emb"))
                  .ok());
  auto delta = store::Table::Open(dir_.File("delta.emb"));
  ASSERT_TRUE(delta.ok()) << delta.status().ToString();
  ASSERT_EQ((*delta)->rows(), changed.size());
  for (std::size_t k = 0; k < changed.size(); ++k) {
    auto row = (*delta)->RowBytes(k, k + 1);
    ASSERT_TRUE(row.ok());
    ASSERT_EQ(std::memcmp(row->data(), v2.data() + changed[k] * kDim, kDim * 4), 0) << k;
  }
  auto src = OpenSource("s3://tables/delta/t.emb");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*delta)->metadata().at(std::string(store::kMetaDeltaOf)),
            store::ContentIdHex((*src)->desc().content_id));

  // A copy of version 1 takes every changed row from it; one the trainer changed too gets that
  // row back by a ranged read.
  std::vector<float> copy = v1;
  copy[7 * kDim + 1] = 42;
  auto s = UpdateInPlace(**src, std::as_writable_bytes(std::span(copy)));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(copy, v2);
  EXPECT_EQ(s->changed_rows, changed.size() + (changed.front() == 7 ? 0 : 1));
  EXPECT_EQ(s->delta_rows, changed.size());

  // No delta where it cannot help, and none left of an earlier version: a version without row
  // hashes, one replacing such a version, a different shape, too many rows changed.
  d = Publish("delta/t.emb", v1, kDim, /*row_hashes=*/false);
  EXPECT_EQ(d.rows, 0u);
  EXPECT_EQ(d.skipped, "the new version stores no row hashes");
  EXPECT_EQ(s3_->Stat({"s3", "tables", "delta/t.emb.delta"}).status().code(),
            StatusCode::kNotFound);
  d = Publish("delta/t.emb", v2, kDim);
  EXPECT_EQ(d.skipped, "the version it replaces stores no row hashes");
  d = Publish("delta/t.emb", std::vector<float>(v2.begin(), v2.end() - kDim), kDim);
  EXPECT_EQ(d.skipped, "the version it replaces is 20000 x 32 F32");
  std::vector<float> most = v2;
  most.resize((kRows - 1) * kDim);
  for (std::uint64_t r = 0; r < kRows / 2; ++r) most[r * kDim] -= 1;
  d = Publish("delta/t.emb", most, kDim);
  EXPECT_EQ(d.rows, 0u);
  EXPECT_NE(d.skipped.find("rows changed"), std::string::npos) << d.skipped;
  EXPECT_EQ(s3_->Stat({"s3", "tables", "delta/t.emb.delta"}).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace embstore::client
