// S3Client's parts that need no server: addresses, configuration, XML, an unreachable endpoint.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "embstore/objstore/s3.h"
#include "embstore/testkit/temp_dir.h"

namespace embstore::objstore {
namespace {

using testkit::TempDir;

TEST(S3UrlTest, Parses) {
  auto u = ParseS3Url("s3://tables/emb/item.emb");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->authority, "tables");
  EXPECT_EQ(u->key, "emb/item.emb");
  EXPECT_EQ(u->ToString(), "s3://tables/emb/item.emb");
  auto b = ParseS3Url("s3://tables");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->key, "");
  EXPECT_FALSE(ParseS3Url("/tmp/x.emb").ok());
  auto bad = ParseS3Url("s3://Bad_Bucket!/k");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a bucket name"), std::string::npos);
}

TEST(S3UrlTest, ObjectAddressesAreNotBucketsOrPrefixes) {
  for (const char* prefix : {"s3://tables", "s3://tables/", "s3://tables/emb/"}) {
    auto u = ParseS3Url(prefix);
    ASSERT_TRUE(u.ok()) << prefix;
    EXPECT_TRUE(u->NamesPrefix()) << prefix;
    auto o = ParseS3ObjectUrl(prefix, "a table object");
    ASSERT_FALSE(o.ok()) << prefix;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(o.status().message(),
              "'" + std::string(prefix) + "' names a bucket or prefix, not a table object");
  }
  auto o = ParseS3ObjectUrl("s3://tables/emb/item.emb", "an object key");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_FALSE(o->NamesPrefix());
  EXPECT_EQ(o->key, "emb/item.emb");
  // A bad address is ParseS3Url's error, not the prefix one.
  auto bad = ParseS3ObjectUrl("s3://Bad_Bucket!/k", "an object key");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not a bucket name"), std::string::npos);
}

TEST(S3XmlTest, RepliesAreReadWithEntitiesDecoded) {
  const std::string error =
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
      "<Message>a&amp;b &lt;c&gt; &#233; &#x1F600;</Message><Empty/></Error>";
  EXPECT_EQ(XmlRootName(error), "Error");
  EXPECT_EQ(XmlRootChildText(error, "Code").value(), "NoSuchKey");
  EXPECT_EQ(XmlRootChildText(error, "Message").value(), "a&b <c> \xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(XmlRootChildText(error, "Empty").value(), "");
  EXPECT_FALSE(XmlRootChildText(error, "Missing").has_value());
  // A proxy's HTML, or a body cut short, is no S3 reply: nothing is found in it.
  for (std::string bad :
       {"<html><body><h1>502 Bad Gateway</h1></body>", "<Error><Code>Slow", "", "not xml at all"}) {
    EXPECT_EQ(XmlRootName(bad), "") << bad;
    EXPECT_FALSE(XmlRootChildText(bad, "Code").has_value()) << bad;
  }
}

TEST(S3XmlTest, ListPagesAndTheirRefusals) {
  const std::string page =
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
      "<Contents><Key>t/a&amp;b.emb</Key><Size>123</Size><ETag>&quot;e1&quot;</ETag></Contents>"
      "<Contents><Key>t/c.emb</Key><Size>18446744073709551615</Size><ETag>\"e2\"</ETag>"
      "</Contents><IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>tok&amp;1</NextContinuationToken></ListBucketResult>";
  auto p = ParseListPage(page, "s3://b/t/");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->objects.size(), 2u);
  EXPECT_EQ(p->objects[0].key, "t/a&b.emb");
  EXPECT_EQ(p->objects[0].size, 123u);
  EXPECT_EQ(p->objects[0].version, "\"e1\"");
  EXPECT_EQ(p->objects[1].size, 18446744073709551615ull);
  EXPECT_TRUE(p->truncated);
  EXPECT_EQ(p->next_token, "tok&1");
  auto last = ParseListPage(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "</ListBucketResult>",
      "s3://b/");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->objects.empty());
  EXPECT_FALSE(last->truncated);
  for (std::string bad :
       {"<Error><Code>AccessDenied</Code></Error>", "<ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key><Size>-1</Size></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><Contents><Key>k</Key></Contents></ListBucketResult>"}) {
    auto r = ParseListPage(bad, "s3://b/t/");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kIOError);
    EXPECT_NE(r.status().message().find("s3://b/t/"), std::string::npos) << r.status().message();
  }
}

TEST(S3XmlTest, CompletionBodyEscapesWhatTheStoreSent) {
  const std::string body = CompleteMultipartUploadBody({"\"abc\"", "x<y&z"});
  EXPECT_EQ(body,
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"abc\"</ETag>"
            "</Part><Part><PartNumber>2</PartNumber><ETag>x&lt;y&amp;z</ETag></Part>"
            "</CompleteMultipartUpload>");
}

S3Config ConfigOf(const std::map<std::string, std::string>& env) {
  auto c = S3ConfigFromEnvironment([&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : S3Config{};
}

TEST(S3ConfigTest, VariablesWin) {
  auto c = ConfigOf({{"AWS_ACCESS_KEY_ID", "AK"},
                     {"AWS_SECRET_ACCESS_KEY", "SK"},
                     {"AWS_SESSION_TOKEN", "T"},
                     {"AWS_REGION", "eu-west-1"},
                     {"AWS_ENDPOINT_URL", "http://127.0.0.1:9000/"}});
  EXPECT_EQ(c.access_key, "AK");
  EXPECT_EQ(c.secret_key, "SK");
  EXPECT_EQ(c.session_token, "T");
  EXPECT_EQ(c.region, "eu-west-1");
  EXPECT_EQ(c.endpoint, "http://127.0.0.1:9000");
  EXPECT_TRUE(c.path_style);
}

TEST(S3ConfigTest, AwsDefaultsAreVirtualHosted) {
  auto c = ConfigOf({{"AWS_DEFAULT_REGION", "us-west-2"}});
  EXPECT_EQ(c.endpoint, "https://s3.us-west-2.amazonaws.com");
  EXPECT_FALSE(c.path_style);
  EXPECT_TRUE(c.access_key.empty());  // anonymous
}

TEST(S3ConfigTest, ProfilesFromFiles) {
  TempDir dir("s3cfg");
  {
    std::ofstream(dir.path() + "/credentials")
        << "[default]\naws_access_key_id = DEF\naws_secret_access_key = defsecret\n\n"
           "[train]\naws_access_key_id=TRAIN\naws_secret_access_key=trainsecret\n"
           "aws_session_token = tok\n";
    std::ofstream(dir.path() + "/config")
        << "[default]\nregion = us-east-2\n[profile train]\nregion=ap-south-1\n"
           "endpoint_url = http://minio.local:9000\n";
  }
  const std::map<std::string, std::string> files = {
      {"AWS_SHARED_CREDENTIALS_FILE", dir.path() + "/credentials"},
      {"AWS_CONFIG_FILE", dir.path() + "/config"}};
  auto def = ConfigOf(files);
  EXPECT_EQ(def.access_key, "DEF");
  EXPECT_EQ(def.secret_key, "defsecret");
  EXPECT_EQ(def.region, "us-east-2");
  auto env = files;
  env["AWS_PROFILE"] = "train";
  auto train = ConfigOf(env);
  EXPECT_EQ(train.access_key, "TRAIN");
  EXPECT_EQ(train.session_token, "tok");
  EXPECT_EQ(train.region, "ap-south-1");
  EXPECT_EQ(train.endpoint, "http://minio.local:9000");
}

TEST(S3ConfigTest, HalfGivenKeysAndBadEndpointsAreErrors) {
  auto half = S3ConfigFromEnvironment([](const char* n) -> const char* {
    return std::string(n) == "AWS_ACCESS_KEY_ID" ? "AK" : nullptr;
  });
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.status().message().find("half given"), std::string::npos);
  auto bad = S3ConfigFromEnvironment([](const char* n) -> const char* {
    return std::string(n) == "AWS_ENDPOINT_URL" ? "127.0.0.1:9000" : nullptr;
  });
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("http://"), std::string::npos);
}

TEST(S3UnreachableTest, RefusedConnectionIsUnavailableAfterRetries) {
  S3Config c;
  c.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  c.max_attempts = 2;
  c.first_backoff = std::chrono::milliseconds(1);
  S3Client s3(c);
  auto h = s3.Stat(ObjectUrl{"s3", "bucket", "key"});
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable) << h.status().ToString();
  EXPECT_NE(h.status().message().find("s3://bucket/key"), std::string::npos);
}

}  // namespace
}  // namespace embstore::objstore
