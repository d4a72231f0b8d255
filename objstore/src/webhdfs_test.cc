// WebHdfsClient and the transfers against a real HDFS (a MiniDFSCluster through
// scripts/hdfs-server.sh: a NameNode, two DataNodes, replication 2, permissions on): every
// request, a file replaced mid-read, a DataNode that dies, a refused write, a cancelled upload.
#include "embstore/objstore/webhdfs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>

#include "embstore/objstore/transfer.h"
#include "embstore/store/writer.h"
#include "embstore/testkit/hdfs_test_fixture.h"
#include "embstore/testkit/temp_dir.h"
#include "test_tables.h"

namespace embstore::objstore {
namespace {

using testkit::HdfsServerTest;
using testkit::TempDir;

std::vector<std::byte> Pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

std::string WriteLocal(const TempDir& dir, const std::string& name,
                       const std::vector<std::byte>& data) {
  const std::string path = dir.File(name);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  return path;
}

std::string Message(const Status& st) { return st.ToString(); }

TEST_F(HdfsServerTest, UploadStatListDelete) {
  WebHdfsClient hdfs(Config());
  TempDir dir("webhdfs");
  const auto data = Pattern(3 << 20, 1);
  const ObjectUrl url = Url("rw/with space/t\xc3\xa9st+1.emb");  // encoded in path and list
  auto version = hdfs.Upload(WriteLocal(dir, "a", data), url, {});
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  auto st = hdfs.Stat(url);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->size, data.size());
  EXPECT_EQ(st->version, *version);

  ASSERT_TRUE(hdfs.Upload(WriteLocal(dir, "b", {}), Url("rw/with space/empty.emb"), {}).ok());
  ASSERT_TRUE(hdfs.MakeDirectories(Url("rw/with space/sub")).ok());
  auto list = hdfs.List(Url("rw/with space/"));
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::map<std::string, std::uint64_t> sizes;
  for (const auto& o : *list) sizes[o.key] = o.size;
  EXPECT_EQ(sizes.size(), 2u);  // files only, not the sub-folder; no temporary files left
  EXPECT_EQ(sizes[url.key], data.size());
  EXPECT_EQ(sizes["rw/with space/empty.emb"], 0u);
  auto by_prefix = hdfs.List(Url("rw/with space/t"));
  ASSERT_TRUE(by_prefix.ok());
  ASSERT_EQ(by_prefix->size(), 1u);
  EXPECT_EQ((*by_prefix)[0].key, url.key);

  ASSERT_TRUE(hdfs.Delete(url).ok());
  auto gone = hdfs.Stat(url);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(hdfs.Delete(url).ok());  // not there: fine
}

// The reads, both ways: straight from the DataNodes (the default) and over WebHDFS alone.
class HdfsReadTest : public HdfsServerTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool direct() const { return GetParam(); }
  HdfsConfig ReadConfig() const {
    HdfsConfig c = Config();
    c.direct_reads = direct();
    c.block_size = 1 << 20;  // files of several HDFS blocks: reads cross their boundaries
    return c;
  }
  // The bytes went the way the test asked for, all of them.
  void ExpectReadWay(const WebHdfsClient& hdfs) const {
    if (direct()) {
      EXPECT_GT(hdfs.direct_bytes(), 0u);
      EXPECT_EQ(hdfs.webhdfs_bytes(), 0u);
    } else {
      EXPECT_EQ(hdfs.direct_bytes(), 0u);
      EXPECT_GT(hdfs.webhdfs_bytes(), 0u);
    }
  }
};
INSTANTIATE_TEST_SUITE_P(Ways, HdfsReadTest, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "Direct" : "WebHdfs"; });

TEST_P(HdfsReadTest, RangesAcrossBlocksOfOneVersion) {
  WebHdfsClient hdfs(ReadConfig());
  TempDir dir("webhdfs");
  const auto data = Pattern((3 << 20) + 12345, 1);  // four HDFS blocks, the last one short
  const ObjectUrl url = Url(std::string("read/") + (direct() ? "d" : "w") + "/t.emb");
  ASSERT_TRUE(hdfs.Upload(WriteLocal(dir, "a", data), url, {}).ok());
  auto st = hdfs.Stat(url);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  for (auto [off, len] :
       std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 1},
                                                            {12345, 100000},
                                                            {(1 << 20) - 7, 14},
                                                            {1000, (2 << 20) + 999},
                                                            {(3 << 20), 12345},
                                                            {data.size() - 1, 1},
                                                            {0, data.size()}}) {
    std::vector<std::byte> part(len);
    Status r = hdfs.ReadRange(url, st->version, off, part);
    ASSERT_TRUE(r.ok()) << off << "+" << len << ": " << Message(r);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + off)) << off << "+" << len;
  }
  std::vector<std::byte> past(10);
  EXPECT_FALSE(hdfs.ReadRange(url, st->version, data.size() - 5, past).ok());
  ExpectReadWay(hdfs);
}

TEST_F(HdfsServerTest, ErrorsNameThePathAndTheException) {
  WebHdfsClient hdfs(Config());
  auto missing = hdfs.Stat(Url("no/such.emb"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(Message(missing.status()).find(Url("no/such.emb").ToString()), std::string::npos);
  EXPECT_NE(Message(missing.status()).find("FileNotFoundException"), std::string::npos)
      << Message(missing.status());

  ASSERT_TRUE(hdfs.MakeDirectories(Url("errors/folder.emb")).ok());
  auto folder = hdfs.Stat(Url("errors/folder.emb"));
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(Message(folder.status()).find("is a folder"), std::string::npos);
  auto listed_file = hdfs.List(Url("no-folder-here/"));
  EXPECT_EQ(listed_file.status().code(), StatusCode::kNotFound);

  // Another user may not write into the superuser's root folder (mode 755).
  HdfsConfig other = Config();
  other.user = "embstore-not-the-superuser";
  WebHdfsClient stranger(other);
  TempDir dir("webhdfs");
  auto denied = stranger.Upload(WriteLocal(dir, "d", Pattern(1000, 2)), Url("denied/x.emb"), {});
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied) << Message(denied.status());
  EXPECT_NE(Message(denied.status()).find("AccessControlException"), std::string::npos);
  EXPECT_NE(Message(denied.status()).find(Url("denied/x.emb").ToString()), std::string::npos);
  EXPECT_EQ(hdfs.Stat(Url("denied/x.emb")).status().code(), StatusCode::kNotFound);
}

TEST_P(HdfsReadTest, AFileReplacedMidReadIsAnErrorNeverTheNewBytes) {
  WebHdfsClient hdfs(ReadConfig());
  TempDir dir("webhdfs");
  const ObjectUrl url = Url(std::string("replace/") + (direct() ? "d" : "w") + "/t.emb");
  const auto v1 = Pattern(1 << 20, 3), v2 = Pattern(1 << 20, 4);
  ASSERT_TRUE(hdfs.Upload(WriteLocal(dir, "v1", v1), url, {}).ok());
  auto opened = hdfs.Stat(url);
  ASSERT_TRUE(opened.ok());
  std::vector<std::byte> part(4096);
  ASSERT_TRUE(hdfs.ReadRange(url, opened->version, 0, part).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), v1.begin()));

  auto replaced = hdfs.Upload(WriteLocal(dir, "v2", v2), url, {});
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_NE(*replaced, opened->version);
  Status st = hdfs.ReadRange(url, opened->version, 4096, part);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << Message(st);
  EXPECT_NE(Message(st).find("replaced"), std::string::npos);
  // The new version reads whole.
  ASSERT_TRUE(hdfs.ReadRange(url, *replaced, 4096, part).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), v2.begin() + 4096));
  ExpectReadWay(hdfs);
}

TEST_F(HdfsServerTest, ACancelledUploadLeavesTheOldFileAndNoTemporaryOne) {
  WebHdfsClient hdfs(Config());
  TempDir dir("webhdfs");
  const ObjectUrl url = Url("cancel/t.emb");
  const auto v1 = Pattern(100000, 5);
  ASSERT_TRUE(hdfs.Upload(WriteLocal(dir, "v1", v1), url, {}).ok());
  auto before = hdfs.Stat(url);
  ASSERT_TRUE(before.ok());
  TransferOptions o;
  o.progress = [](std::uint64_t done, std::uint64_t) { return done < (4u << 20); };
  auto up = hdfs.Upload(WriteLocal(dir, "v2", Pattern(64 << 20, 6)), url, o);
  ASSERT_FALSE(up.ok());
  EXPECT_EQ(up.status().code(), StatusCode::kCancelled) << Message(up.status());
  auto after = hdfs.Stat(url);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->version, before->version);
  EXPECT_EQ(after->size, v1.size());
  auto list = hdfs.List(Url("cancel/"));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u) << (*list)[1].key;
}

TEST_P(HdfsReadTest, ADeadDataNodeIsReadAroundOnTheOtherReplica) {
  WebHdfsClient hdfs(ReadConfig());
  TempDir dir("webhdfs");
  const ObjectUrl url = Url(std::string("replicas/") + (direct() ? "d" : "w") + "/t.emb");
  const auto data = Pattern(8 << 20, 7);
  ASSERT_TRUE(hdfs.Upload(WriteLocal(dir, "a", data), url, {}).ok());
  auto st = hdfs.Stat(url);
  ASSERT_TRUE(st.ok());
  for (int dead = 0; dead < 2; ++dead) {
    ASSERT_TRUE(Server().StopDataNode(dead)) << "DataNode " << dead;
    // Many reads: the NameNode sends some of them to the dead DataNode until it notices.
    for (int i = 0; i < 12; ++i) {
      const std::uint64_t off = static_cast<std::uint64_t>(i) * (600 << 10);
      std::vector<std::byte> part(700 << 10);
      Status r = hdfs.ReadRange(url, st->version, off, part);
      ASSERT_TRUE(r.ok()) << "DataNode " << dead << " down, read " << i << ": " << Message(r);
      EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + off));
    }
    ASSERT_TRUE(Server().RestartDataNode(dead)) << "DataNode " << dead;
  }
  ExpectReadWay(hdfs);
}

TEST_P(HdfsReadTest, TablesRoundTripVerifiedAndACorruptOneIsNotPublished) {
  WebHdfsClient hdfs(ReadConfig());
  TempDir dir("webhdfs");
  const std::string src = testing::MakeKeyedTable(dir, "src.emb", 40000, 32);
  const std::string way = direct() ? "d" : "w";
  const ObjectUrl url = Url("tables/" + way + "/round.emb");
  TransferOptions o;
  o.part_bytes = 1 << 20;
  auto up = UploadFile(hdfs, src, url, o);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  auto down = DownloadTable(hdfs, url, dir.File("back.emb"), o);
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->version, up->version);
  EXPECT_EQ(testkit::ReadFileOrEmpty(dir.File("back.emb")), testkit::ReadFileOrEmpty(src));

  std::string bytes = testkit::ReadFileOrEmpty(src);
  bytes[bytes.size() / 2] ^= 0x40;  // a row of the matrix
  std::ofstream(dir.File("bad.emb"), std::ios::binary) << bytes;
  ASSERT_TRUE(hdfs.Upload(dir.File("bad.emb"), Url("tables/" + way + "/bad.emb"), {}).ok());
  auto bad = DownloadTable(hdfs, Url("tables/" + way + "/bad.emb"), dir.File("bad-back.emb"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kCorruption) << Message(bad.status());
  EXPECT_NE(Message(bad.status()).find("hdfs://"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir.File("bad-back.emb")));
}

}  // namespace
}  // namespace embstore::objstore
