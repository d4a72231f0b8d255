// The location resolver (open_source.h): what each kind of location string opens as, the table
// name rules, and what ListTables finds, against real files, a real server and a manifest.
#include "embstore/client/open_source.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "embstore/client/sharded.h"
#include "embstore/server/server.h"
#include "embstore/testkit/temp_dir.h"
#include "test_tables.h"

namespace embstore::client {
namespace {

using store::DType;

class OpenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    a_ = testing::WriteRandomTable(dir_ + "/a.emb", 300, 8, DType::kF32, true, 64, 1);
    testing::WriteRandomTable(dir_ + "/b.emb", 50, 4, DType::kF16, false, 16, 2);
    std::ofstream(dir_ + "/.hidden.emb") << "x";
    std::ofstream(dir_ + "/notes.txt") << "x";
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::milliseconds(0));
  }
  std::string Serve() {
    auto s = testing::StartTestServer(dir_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    return server_->addresses()[0];
  }
  std::string Manifest(const std::string& target) {
    ShardManifest m;
    m.table = "logical";
    m.rows = 300;
    m.dim = 8;
    m.dtype = DType::kF32;
    m.shards = {{0, 300, target, "a", std::nullopt}};
    const std::string path = temp_.File("m.json");
    std::ofstream(path) << FormatShardManifest(m);
    return path;
  }
  static SourceOptions Named(const std::string& table, bool allow_local = true) {
    SourceOptions o;
    o.table = table;
    o.allow_local = allow_local;
    return o;
  }
  static std::vector<std::byte> Rows(RowSource& src, std::uint64_t b, std::uint64_t e) {
    std::vector<std::byte> out((e - b) * src.desc().row_bytes);
    auto st = src.CopyRows(b, e, out, {});
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    return out;
  }

  testkit::TempDir temp_;
  std::string dir_;
  std::vector<std::byte> a_;
  std::unique_ptr<server::Server> server_;
};

TEST_F(OpenSourceTest, ClassifiesEachKindOfLocation) {
  auto kind = [](const std::string& s) { return ClassifyLocation(s); };
  EXPECT_EQ(*kind(dir_ + "/a.emb"), LocationKind::kFile);
  EXPECT_EQ(*kind(dir_), LocationKind::kDirectory);
  EXPECT_EQ(*kind(Manifest("127.0.0.1:1")), LocationKind::kManifest);
  EXPECT_EQ(*kind("127.0.0.1:50051"), LocationKind::kServer);
  EXPECT_EQ(*kind("unix:/run/embstore.sock"), LocationKind::kServer);
  EXPECT_EQ(*kind("dns:///embstore.default.svc:50051"), LocationKind::kServer);
  EXPECT_EQ(*kind("s3://bucket/tables/a.emb"), LocationKind::kObject);
  EXPECT_EQ(*kind("s3://bucket/tables/"), LocationKind::kObjectPrefix);
  EXPECT_EQ(*kind("s3://bucket"), LocationKind::kObjectPrefix);
  // A local path comes first: an existing file named like a target is a file.
  const std::string colon = dir_ + "/h:1";
  std::filesystem::copy_file(dir_ + "/a.emb", colon);
  EXPECT_EQ(*kind(colon), LocationKind::kFile);

  // Missing paths are NotFound, naming them; malformed targets and buckets InvalidArgument.
  auto missing = kind(dir_ + "/v2:old.emb");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("v2:old.emb"), std::string::npos);
  EXPECT_EQ(kind("nonsense").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(kind("host:99999").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kind("s3://Bad_Bucket!/x.emb").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kind("").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(OpenSourceTest, FilesAndDirectoriesWithTheirTableNames) {
  auto file = OpenSource(dir_ + "/a.emb");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->kind(), "file");
  EXPECT_EQ((*file)->desc().name, "a");
  EXPECT_EQ(Rows(**file, 0, 300), a_);
  EXPECT_TRUE(OpenSource(dir_ + "/a.emb", Named("a")).ok());
  auto wrong = OpenSource(dir_ + "/a.emb", Named("b"));
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("holds table 'a', not 'b'"), std::string::npos)
      << wrong.status().ToString();

  auto in_dir = OpenSource(dir_, Named("a"));
  ASSERT_TRUE(in_dir.ok()) << in_dir.status().ToString();
  EXPECT_EQ((*in_dir)->desc().name, "a");
  EXPECT_EQ(Rows(**in_dir, 17, 200), std::vector<std::byte>(a_.begin() + 17 * 32,
                                                            a_.begin() + 200 * 32));
  auto unnamed = OpenSource(dir_);
  EXPECT_EQ(unnamed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unnamed.status().message().find("needs a table name"), std::string::npos);
  auto absent = OpenSource(dir_, Named("zz"));
  EXPECT_EQ(absent.status().code(), StatusCode::kNotFound);
  EXPECT_NE(absent.status().message().find("'zz'"), std::string::npos);
  // A name that could leave the directory is refused before any path is made of it.
  auto escape = OpenSource(dir_, Named("../a"));
  EXPECT_EQ(escape.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(escape.status().message().find("invalid table name"), std::string::npos);
}

TEST_F(OpenSourceTest, ServersAndManifests) {
  const std::string target = Serve();
  auto src = OpenSource(target, Named("a", false));
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->kind(), "server");
  EXPECT_EQ(Rows(**src, 0, 300), a_);
  EXPECT_GT((*src)->transferred_bytes(), a_.size() - 1);
  EXPECT_EQ(OpenSource(target).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenSource(target, Named("zz")).status().code(), StatusCode::kNotFound);

  const std::string manifest = Manifest(target);
  auto sharded = OpenSource(manifest);
  ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
  EXPECT_EQ((*sharded)->kind(), "sharded");
  EXPECT_EQ((*sharded)->desc().name, "logical");
  EXPECT_EQ(Rows(**sharded, 0, 300), a_);
  auto wrong = OpenSource(manifest, Named("a"));
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.status().message().find("holds table 'logical', not 'a'"), std::string::npos);
}

TEST_F(OpenSourceTest, ListsTheTablesOfEachKind) {
  using V = std::vector<std::string>;
  EXPECT_EQ(*ListTables(dir_), (V{"a", "b"}));  // no dotfiles, no other suffixes
  EXPECT_EQ(*ListTables(dir_ + "/b.emb"), (V{"b"}));
  const std::string target = Serve();
  EXPECT_EQ(*ListTables(target), (V{"a", "b"}));
  EXPECT_EQ(*ListTables(Manifest(target)), (V{"logical"}));
  EXPECT_EQ(*ListTables("s3://bucket/t/words.emb"), (V{"words"}));
  EXPECT_EQ(ListTables(dir_ + "/none").status().code(), StatusCode::kNotFound);
}

TEST_F(OpenSourceTest, ObjectAddressesOfTables) {
  EXPECT_EQ(*TableObjectUrl("s3://bkt/t/words.emb", ""), "s3://bkt/t/words.emb");
  EXPECT_EQ(*TableObjectUrl("s3://bkt/t/words.emb", "words"), "s3://bkt/t/words.emb");
  EXPECT_EQ(*TableObjectUrl("s3://bkt/t/", "words"), "s3://bkt/t/words.emb");
  EXPECT_EQ(*TableObjectUrl("s3://bkt/t", "words"), "s3://bkt/t/words.emb");
  EXPECT_EQ(*TableObjectUrl("s3://bkt", "words"), "s3://bkt/words.emb");
  EXPECT_EQ(TableObjectUrl("s3://bkt/t/words.emb", "other").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(TableObjectUrl("s3://bkt/t/", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TableObjectUrl("s3://bkt/t/", "../x").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace embstore::client
