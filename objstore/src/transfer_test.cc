// DownloadTable and UploadFile against a real S3 server (testkit::S3Server): round trips bit for
// bit, a store killed and restarted mid-download, a replaced object, a corrupt object, atomicity.
#include "embstore/objstore/transfer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "embstore/store/table.h"
#include "embstore/store/writer.h"
#include "embstore/testkit/s3_test_fixture.h"
#include "embstore/testkit/temp_dir.h"
#include "test_tables.h"

namespace embstore::objstore {
namespace {

using testkit::S3ServerTest;

using testkit::ReadFileOrEmpty;
using testkit::TempDir;

class TransferTest : public S3ServerTest {
 protected:
  void SetUp() override {
    S3ServerTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    s3_ = std::make_unique<S3Client>(Config());
    ASSERT_TRUE(s3_->CreateBucket("tables").ok());
  }
  std::unique_ptr<S3Client> s3_;
};

TEST_F(TransferTest, UploadThenDownloadIsBitIdentical) {
  TempDir dir("xfer");
  const std::string src =
      testing::MakeKeyedTable(dir, "src.emb", 60000, 64, 0.5f);  // ~15 MiB, several parts
  const ObjectUrl url{"s3", "tables", "round/trip.emb"};
  TransferOptions o;
  o.part_bytes = 5 << 20;
  o.parallel = 3;
  std::uint64_t last = 0;
  o.progress = [&](std::uint64_t done, std::uint64_t) {
    last = done;
    return true;
  };
  auto up = UploadFile(*s3_, src, url, o);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_FALSE(up->version.empty());
  auto down = DownloadTable(*s3_, url, dir.File("back.emb"), o);
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->version, up->version);
  EXPECT_EQ(ReadFileOrEmpty(dir.File("back.emb")), ReadFileOrEmpty(src));
  // An existing destination is kept unless overwrite.
  auto again = DownloadTable(*s3_, url, dir.File("back.emb"), o);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
  o.overwrite = true;
  EXPECT_TRUE(DownloadTable(*s3_, url, dir.File("back.emb"), o).ok());
}

TEST_F(TransferTest, CorruptObjectIsNeverPublished) {
  TempDir dir("xfer");
  const std::string src = testing::MakeKeyedTable(dir, "src.emb", 5000, 16, 1.0f);
  std::string bytes = ReadFileOrEmpty(src);
  bytes[bytes.size() - 100] ^= 0x01;  // a flipped bit in the keys or the last rows
  bytes[bytes.size() / 2] ^= 0x40;    // and one in the rows
  const ObjectUrl url{"s3", "tables", "corrupt.emb"};
  ASSERT_TRUE(s3_->Put(url, std::as_bytes(std::span<const char>(bytes.data(), bytes.size()))).ok());
  auto down = DownloadTable(*s3_, url, dir.File("corrupt.emb"));
  ASSERT_FALSE(down.ok());
  EXPECT_EQ(down.status().code(), StatusCode::kCorruption) << down.status().ToString();
  EXPECT_NE(down.status().message().find("s3://tables/corrupt.emb"), std::string::npos);
  EXPECT_TRUE(ReadFileOrEmpty(dir.File("corrupt.emb")).empty());  // nothing under the name
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  // A file that is no table at all says so.
  const ObjectUrl junk{"s3", "tables", "junk.emb"};
  ASSERT_TRUE(s3_->Put(junk, std::as_bytes(std::span<const char>("not a table", 11))).ok());
  auto j = DownloadTable(*s3_, junk, dir.File("junk.emb"));
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("not a valid embstore table"), std::string::npos)
      << j.status().ToString();
}

TEST_F(TransferTest, MissingObjectIsNotFound) {
  TempDir dir("xfer");
  auto d = DownloadTable(*s3_, ObjectUrl{"s3", "tables", "nope.emb"}, dir.File("nope.emb"));
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound) << d.status().ToString();
}

TEST_F(TransferTest, ReplacedObjectFailsTheDownload) {
  TempDir dir("xfer");
  const std::string a = testing::MakeKeyedTable(dir, "a.emb", 80000, 64, 1.0f);
  const std::string b = testing::MakeKeyedTable(dir, "b.emb", 100, 64, 2.0f);
  const ObjectUrl url{"s3", "tables", "replaced.emb"};
  ASSERT_TRUE(UploadFile(*s3_, a, url).ok());
  TransferOptions o;
  o.part_bytes = 1 << 20;
  o.parallel = 1;
  bool replaced = false;
  o.progress = [&](std::uint64_t done, std::uint64_t) {
    if (!replaced && done > 0) {
      replaced = UploadFile(*s3_, b, url).ok();  // a new version mid-download
    }
    return true;
  };
  auto d = DownloadTable(*s3_, url, dir.File("out.emb"), o);
  ASSERT_TRUE(replaced);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kFailedPrecondition) << d.status().ToString();
  EXPECT_NE(d.status().message().find("replaced during the download"), std::string::npos);
  EXPECT_TRUE(ReadFileOrEmpty(dir.File("out.emb")).empty());
}

TEST_F(TransferTest, UploadReplacesAtomically) {
  TempDir dir("xfer");
  const std::string a = testing::MakeKeyedTable(dir, "a.emb", 3000, 64, 1.0f);
  const std::string b =
      testing::MakeKeyedTable(dir, "b.emb", 30000, 256, 2.0f);  // 6 parts of 5 MiB
  const ObjectUrl url{"s3", "tables", "atomic.emb"};
  ASSERT_TRUE(UploadFile(*s3_, a, url).ok());
  // A failed upload (cancelled half way) leaves the old object as it was.
  TransferOptions o;
  o.part_bytes = 5 << 20;
  o.parallel = 1;
  o.progress = [](std::uint64_t, std::uint64_t) { return false; };  // after the first part
  auto up = UploadFile(*s3_, b, url, o);
  EXPECT_EQ(up.status().code(), StatusCode::kCancelled) << up.status().ToString();
  auto d = DownloadTable(*s3_, url, dir.File("out.emb"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(ReadFileOrEmpty(dir.File("out.emb")), ReadFileOrEmpty(a));
}

// Last: the store takes a while to settle after the restart.
TEST_F(TransferTest, StoreRestartMidDownloadResumes) {
  TempDir dir("xfer");
  const std::string src = testing::MakeKeyedTable(dir, "src.emb", 80000, 64, 3.0f);  // ~20 MiB
  const ObjectUrl url{"s3", "tables", "restart.emb"};
  ASSERT_TRUE(UploadFile(*s3_, src, url).ok());
  S3Config c = Config();
  c.max_attempts = 40;  // up to ~3 minutes of backoff: the store restarts in seconds
  S3Client patient(c);
  TransferOptions o;
  o.part_bytes = 1 << 20;
  o.parallel = 2;
  std::atomic<bool> killed{false};
  std::thread restarter;
  o.progress = [&](std::uint64_t done, std::uint64_t) {
    if (!killed && done > 0) {
      killed = true;
      restarter = std::thread([&] { EXPECT_TRUE(Server().Restart()) << Server().why(); });
    }
    return true;
  };
  auto d = DownloadTable(patient, url, dir.File("out.emb"), o);
  if (restarter.joinable()) restarter.join();
  ASSERT_TRUE(killed);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(ReadFileOrEmpty(dir.File("out.emb")), ReadFileOrEmpty(src));
}

}  // namespace
}  // namespace embstore::objstore
