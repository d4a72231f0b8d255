// WebHdfsClient's parts that need no cluster: hdfs:// addresses, the URL dispatch of every store,
// configuration, RemoteException documents, a NameNode that is not there.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "embstore/objstore/object_store.h"
#include "embstore/objstore/webhdfs.h"

namespace embstore::objstore {
namespace {

TEST(HdfsUrlTest, Parses) {
  auto u = ParseHdfsUrl("hdfs://nn.example:9871/user/emb/item.emb");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "hdfs");
  EXPECT_EQ(u->authority, "nn.example:9871");
  EXPECT_EQ(u->key, "user/emb/item.emb");
  EXPECT_EQ(u->ToString(), "hdfs://nn.example:9871/user/emb/item.emb");
  EXPECT_FALSE(u->NamesPrefix());

  auto folder = ParseHdfsUrl("hdfs://nn/tables/");
  ASSERT_TRUE(folder.ok());
  EXPECT_EQ(folder->authority, "nn");
  EXPECT_TRUE(folder->NamesPrefix());
  auto root = ParseHdfsUrl("hdfs://[::1]:9870");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_TRUE(root->NamesPrefix());
}

TEST(HdfsUrlTest, RefusesWhatWouldGoWrong) {
  for (const char* bad :
       {"hdfs://", "hdfs:///path", "hdfs://nn:99999/x", "hdfs://nn:0/x", "hdfs://nn/a/../b",
        "hdfs://nn/a//b", "hdfs://nn/a?op=DELETE", "hdfs://nn/./b", "hdfs://unix:/x"}) {
    auto u = ParseHdfsUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
      EXPECT_NE(u.status().message().find(bad), std::string::npos) << u.status().ToString();
    }
  }
}

TEST(ObjectUrlTest, EachSchemeGoesToItsStore) {
  EXPECT_TRUE(IsObjectUrl("s3://b/k"));
  EXPECT_TRUE(IsObjectUrl("hdfs://nn/k"));
  EXPECT_FALSE(IsObjectUrl("/tmp/x.emb"));
  EXPECT_FALSE(IsObjectUrl("gs://b/k"));
  auto s3 = ParseObjectUrl("s3://tables/a.emb");
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->scheme, "s3");
  auto hdfs = ParseObjectUrl("hdfs://nn:1234/a.emb");
  ASSERT_TRUE(hdfs.ok());
  EXPECT_EQ(hdfs->scheme, "hdfs");
  auto other = ParseObjectUrl("gs://b/k");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("gs://b/k"), std::string::npos);

  auto folder = ParseObjectKeyUrl("hdfs://nn/tables/", "a table object");
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().message(), "'hdfs://nn/tables/' names a folder, not a table object");
}

TEST(HdfsConfigTest, FromTheEnvironment) {
  std::map<std::string, std::string> env = {{"HADOOP_USER_NAME", "trainer"}};
  auto get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto c = HdfsConfigFromEnvironment(get);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->user, "trainer");
  EXPECT_FALSE(c->kerberos);
  EXPECT_FALSE(c->https);

  env = {{"EMBSTORE_HDFS_AUTH", "kerberos"},
         {"EMBSTORE_HDFS_HTTPS", "1"},
         {"EMBSTORE_HDFS_DELEGATION_TOKEN", "tok"}};
  c = HdfsConfigFromEnvironment(get);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->kerberos);
  EXPECT_TRUE(c->https);
  EXPECT_EQ(c->delegation_token, "tok");
  EXPECT_FALSE(c->user.empty());  // the login name

  env = {{"EMBSTORE_HDFS_AUTH", "token"}};
  c = HdfsConfigFromEnvironment(get);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("EMBSTORE_HDFS_AUTH is 'token'"), std::string::npos);
}

TEST(RemoteExceptionTest, ReadsWebHdfsErrors) {
  auto re = ParseRemoteException(
      R"({"RemoteException":{"exception":"FileNotFoundException","javaClassName":)"
      R"("java.io.FileNotFoundException","message":"File does not exist: /x"}})");
  EXPECT_EQ(re.exception, "FileNotFoundException");
  EXPECT_EQ(re.message, "File does not exist: /x");
  for (const char* junk : {"", "<html>502</html>", "{\"RemoteException\": 3}", "[1]",
                           "{\"RemoteException\":{\"exception\":7}}", "{\"a\":"}) {
    auto j = ParseRemoteException(junk);
    EXPECT_EQ(j.exception, "") << junk;
  }
}

TEST(WebHdfsUnreachableTest, NoNameNodeIsUnavailableNamingTheUrl) {
  HdfsConfig c;
  c.user = "trainer";
  c.max_attempts = 2;
  c.first_backoff = std::chrono::milliseconds(1);
  WebHdfsClient hdfs(c);
  auto s = hdfs.Stat(ObjectUrl{"hdfs", "127.0.0.1:1", "t/a.emb"});  // nothing listens on port 1
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable) << s.status().ToString();
  EXPECT_NE(s.status().message().find("hdfs://127.0.0.1:1/t/a.emb"), std::string::npos)
      << s.status().ToString();
}

}  // namespace
}  // namespace embstore::objstore
