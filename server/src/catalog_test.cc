#include "catalog.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "test_util.h"

namespace embstore::server {
namespace {

using testing::TableSpec;
using testing::TempDir;
using testing::WriteTestTable;

std::vector<std::string> Names(const Catalog& c) {
  std::vector<std::string> out;
  for (const auto& e : c.List()) out.push_back(e->name());
  return out;
}

// name -> (size, mtime) of every entry of a directory.
std::map<std::string, std::pair<off_t, std::int64_t>> Snapshot(const std::string& dir) {
  std::map<std::string, std::pair<off_t, std::int64_t>> out;
  for (const auto& de : std::filesystem::directory_iterator(dir)) {
    struct stat st;
    ::lstat(de.path().c_str(), &st);
    out[de.path().filename()] = {st.st_size, st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
  }
  return out;
}

TEST(Catalog, ServesEveryEmbFileUnderItsName) {
  TempDir dir;
  ASSERT_TRUE(WriteTestTable(dir.File("words.emb"), {}).ok());
  ASSERT_TRUE(WriteTestTable(dir.File("items.v2.emb"), {}).ok());
  testkit::WriteFileOrDie(dir.File("notes.txt"), "not a table");
  ASSERT_TRUE(WriteTestTable(dir.File(".hidden.emb"), {}).ok());
  std::filesystem::create_directory(dir.File("subdir.emb"));
  auto c = Catalog::Open({.dir = dir.path()});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(Names(**c), (std::vector<std::string>{"items.v2", "words"}));
  auto e = (*c)->Get("words");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->table().rows(), 100u);
  EXPECT_EQ((*e)->path(), std::filesystem::canonical(dir.path()).string() + "/words.emb");
  EXPECT_GT((*e)->generation(), 0u);
  EXPECT_NE((*e)->content_id(), 0u);
}

TEST(Catalog, UnknownOrInvalidNameIsAnError) {
  TempDir dir;
  ASSERT_TRUE(WriteTestTable(dir.File("words.emb"), {}).ok());
  auto c = Catalog::Open({.dir = dir.path()});
  ASSERT_TRUE(c.ok());
  auto missing = (*c)->Get("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("'nope'"), std::string::npos);
  EXPECT_EQ((*c)->Get("../words").status().code(), StatusCode::kInvalidArgument);
}

TEST(Catalog, MissingDirectoryIsNotFound) {
  auto c = Catalog::Open({.dir = "/nonexistent/embstore/dir"});
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/embstore/dir"), std::string::npos);
}

TEST(Catalog, PicksUpNewReplacedAndRemovedFilesOnRefresh) {
  TempDir dir;
  ASSERT_TRUE(WriteTestTable(dir.File("a.emb"), {}).ok());
  auto c = Catalog::Open({.dir = dir.path()});
  ASSERT_TRUE(c.ok());
  auto old_a = (*c)->Get("a").value();

  ASSERT_TRUE(WriteTestTable(dir.File("b.emb"), {}).ok());
  TableSpec changed;
  changed.salt = 1;
  ASSERT_TRUE(WriteTestTable(dir.File("a.emb"), changed).ok());  // replaced by rename
  ASSERT_TRUE((*c)->Refresh().ok());
  EXPECT_EQ(Names(**c), (std::vector<std::string>{"a", "b"}));
  auto new_a = (*c)->Get("a").value();
  EXPECT_GT(new_a->generation(), old_a->generation());
  EXPECT_NE(new_a->content_id(), old_a->content_id());
  EXPECT_NE(new_a->file().inode, old_a->file().inode);

  // The old version stays readable for whoever holds it.
  auto old_rows = old_a->table().RowBytes(0, 1);
  ASSERT_TRUE(old_rows.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(old_rows->data()), old_rows->size()),
            testing::ExpectedRowBytes({}, 0, 1));

  ASSERT_EQ(::unlink(dir.File("a.emb").c_str()), 0);
  ASSERT_TRUE((*c)->Refresh().ok());
  EXPECT_EQ(Names(**c), (std::vector<std::string>{"b"}));
  EXPECT_TRUE(new_a->table().RowBytes(0, 100).ok());
}

TEST(Catalog, SkipsFilesThatFailValidationAndReportsThem) {
  TempDir dir;
  testkit::WriteFileOrDie(dir.File("broken.emb"), std::string(100, 'x'));
  ASSERT_TRUE(WriteTestTable(dir.File("good.emb"), {}).ok());
  std::vector<std::pair<std::string, Status>> events;
  auto c = Catalog::Open({.dir = dir.path()},
                         [&](const std::string& name, const std::string&, std::uint64_t,
                             const Status& st) { events.emplace_back(name, st); });
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(Names(**c), (std::vector<std::string>{"good"}));
  bool reported = false;
  for (const auto& [name, st] : events) reported |= name == "broken" && !st.ok();
  EXPECT_TRUE(reported);
  // Reported once, not on every rescan.
  events.clear();
  ASSERT_TRUE((*c)->Refresh().ok());
  EXPECT_TRUE(events.empty());
}

TEST(Catalog, NeverWritesIntoTheDirectory) {
  TempDir dir;
  ASSERT_TRUE(WriteTestTable(dir.File("a.emb"), {}).ok());
  testkit::WriteFileOrDie(dir.File("bad.emb"), "garbage");
  const auto before = Snapshot(dir.path());
  {
    auto c = Catalog::Open({.dir = dir.path(), .verify_on_load = true});
    ASSERT_TRUE(c.ok());
    ASSERT_TRUE((*c)->Refresh().ok());
    auto e = (*c)->Get("a");
    ASSERT_TRUE(e.ok());
    EXPECT_TRUE((*e)->table().VerifyAll().ok());
  }
  EXPECT_EQ(Snapshot(dir.path()), before);
}

TEST(Catalog, WatcherPicksUpChangesInTheBackground) {
  TempDir dir;
  auto c = Catalog::Open({.dir = dir.path(), .poll_interval = std::chrono::milliseconds(10)});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)->List().empty());
  (*c)->Watch();
  ASSERT_TRUE(WriteTestTable(dir.File("late.emb"), {}).ok());
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    seen = (*c)->Get("late").ok();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(seen);
  (*c)->StopWatching();
}

TEST(TableEntry, CheckIntactReportsAFileShrunkUnderTheMapping) {
  TempDir dir;
  ASSERT_TRUE(WriteTestTable(dir.File("t.emb"), {.rows = 2000}).ok());
  auto c = Catalog::Open({.dir = dir.path()});
  ASSERT_TRUE(c.ok());
  auto e = (*c)->Get("t").value();
  EXPECT_TRUE(e->CheckIntact().ok());
  ASSERT_EQ(::truncate(dir.File("t.emb").c_str(), 4096), 0);
  Status st = e->CheckIntact();
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("shrank"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("t.emb"), std::string::npos);
}

}  // namespace
}  // namespace embstore::server
