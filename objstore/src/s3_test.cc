// S3Client against a real S3 server (SeaweedFS through scripts/s3-server.sh, with signature
// checking on).
#include "embstore/objstore/s3.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "embstore/testkit/s3_test_fixture.h"

namespace embstore::objstore {
namespace {

using testkit::S3ServerTest;

// --- Against a real server ---------------------------------------------------------------------

std::vector<std::byte> Pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

TEST_F(S3ServerTest, PutHeadRangedGetListDelete) {
  S3Client s3(Config());
  ASSERT_TRUE(s3.CreateBucket("objtest").ok());
  const auto data = Pattern(3 << 20, 1);
  const ObjectUrl url{"s3", "objtest",
                      "dir/with space/t\xc3\xa9st+1.emb"};  // encoded in path and list
  ASSERT_TRUE(s3.Put(url, data).ok());
  auto head = s3.Stat(url);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size, data.size());
  EXPECT_FALSE(head->version.empty());

  std::vector<std::byte> part(100000);
  ASSERT_TRUE(s3.GetRange(url, 12345, part).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + 12345));
  std::vector<std::byte> all(data.size());
  ASSERT_TRUE(s3.GetRange(url, 0, all, head->version).ok());
  EXPECT_EQ(all, data);

  ASSERT_TRUE(
      s3.Put(ObjectUrl{"s3", "objtest", "dir/other.emb"}, std::span<const std::byte>()).ok());
  ASSERT_TRUE(s3.Put(ObjectUrl{"s3", "objtest", "elsewhere.emb"},
                     std::span<const std::byte>(data).first(10))
                  .ok());
  auto list = s3.List(ObjectUrl{"s3", "objtest", "dir/"});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  std::map<std::string, std::uint64_t> sizes;
  for (const auto& o : *list) sizes[o.key] = o.size;
  EXPECT_EQ(sizes[url.key], data.size());
  EXPECT_EQ(sizes["dir/other.emb"], 0u);

  ASSERT_TRUE(s3.Delete(url).ok());
  auto gone = s3.Stat(url);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
}

TEST_F(S3ServerTest, MissingObjectAndBucketAreNotFound) {
  S3Client s3(Config());
  ASSERT_TRUE(s3.CreateBucket("objtest").ok());
  std::vector<std::byte> buf(10);
  Status st = s3.GetRange(ObjectUrl{"s3", "objtest", "no/such.emb"}, 0, buf);
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.ToString();
  EXPECT_NE(st.message().find("s3://objtest/no/such.emb"), std::string::npos) << st.ToString();
  auto nb = s3.List(ObjectUrl{"s3", "no-such-bucket-here", ""});
  ASSERT_FALSE(nb.ok());
  EXPECT_EQ(nb.status().code(), StatusCode::kNotFound) << nb.status().ToString();
}

TEST_F(S3ServerTest, WrongCredentialsArePermissionDenied) {
  S3Config bad = Config();
  bad.secret_key = "not-the-secret";
  S3Client s3(bad);
  auto h = s3.Stat(ObjectUrl{"s3", "objtest", "anything"});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kPermissionDenied) << h.status().ToString();
  S3Config anon = Config();
  anon.access_key.clear();
  anon.secret_key.clear();
  Status put =
      S3Client(anon).Put(ObjectUrl{"s3", "objtest", "anon.emb"}, std::span<const std::byte>());
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied) << put.ToString();
  std::vector<std::byte> buf(4);
  Status get = s3.GetRange(ObjectUrl{"s3", "objtest", "anything"}, 0, buf);
  EXPECT_NE(get.message().find("SignatureDoesNotMatch"), std::string::npos) << get.ToString();
}

TEST_F(S3ServerTest, MultipartAppearsOnlyWhenComplete) {
  S3Client s3(Config());
  ASSERT_TRUE(s3.CreateBucket("objtest").ok());
  const ObjectUrl url{"s3", "objtest", "multi.emb"};
  const auto data = Pattern((5 << 20) * 2 + 777, 2);
  auto id = s3.CreateMultipartUpload(url);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::vector<std::string> etags;
  for (std::size_t off = 0, n = 1; off < data.size(); off += 5 << 20, ++n) {
    const std::size_t len = std::min<std::size_t>(5 << 20, data.size() - off);
    auto e = s3.UploadPart(url, *id, static_cast<int>(n), std::span(data).subspan(off, len));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    etags.push_back(*e);
    EXPECT_EQ(s3.Stat(url).status().code(), StatusCode::kNotFound);  // nothing visible yet
  }
  auto done = s3.CompleteMultipartUpload(url, *id, etags);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  std::vector<std::byte> back(data.size());
  ASSERT_TRUE(s3.GetRange(url, 0, back).ok());
  EXPECT_EQ(back, data);

  // An aborted upload leaves nothing.
  const ObjectUrl other{"s3", "objtest", "aborted.emb"};
  auto id2 = s3.CreateMultipartUpload(other);
  ASSERT_TRUE(id2.ok());
  ASSERT_TRUE(s3.UploadPart(other, *id2, 1, std::span(data).first(1000)).ok());
  ASSERT_TRUE(s3.AbortMultipartUpload(other, *id2).ok());
  EXPECT_EQ(s3.Stat(other).status().code(), StatusCode::kNotFound);
}

TEST_F(S3ServerTest, ReplacedObjectFailsIfMatch) {
  S3Client s3(Config());
  ASSERT_TRUE(s3.CreateBucket("objtest").ok());
  const ObjectUrl url{"s3", "objtest", "replaced.emb"};
  ASSERT_TRUE(s3.Put(url, Pattern(1000, 3)).ok());
  auto v1 = s3.Stat(url);
  ASSERT_TRUE(v1.ok());
  ASSERT_TRUE(s3.Put(url, Pattern(1000, 4)).ok());
  std::vector<std::byte> buf(100);
  Status st = s3.GetRange(url, 0, buf, v1->version);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
}

}  // namespace
}  // namespace embstore::objstore
