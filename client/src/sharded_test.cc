// Sharded tables: the manifest parser's checks, and reads through OpenShardedSource from three
// real servers on loopback (in-process), including a server that is down when the read starts and
// comes back, one killed and restarted mid-load, and one that never comes back; and shards that
// are files and directories.
#include "embstore/client/sharded.h"
#include "embstore/client/open_source.h"
#include "embstore/testkit/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "embstore/server/server.h"
#include "embstore/store/table.h"
#include "embstore/store/writer.h"

namespace embstore::client {
namespace {

using store::DType;

std::string Valid() {
  return R"({
    // comments are allowed
    "format": "embstore-shards/1", "table": "items", "rows": 30, "dim": 4, "dtype": "F32",
    "shards": [
      {"begin": 0, "end": 10, "target": "10.0.0.1:7070", "table": "items-0"},
      {"begin": 10, "end": 25, "target": "unix:/run/embstore/embstore.sock", "table": "items-1",
       "content_id": "0x00000000000000ff"},
      {"begin": 25, "end": 30, "target": "host-c:7070", "table": "items-2", "content_id": 7}
    ]})";
}

// Valid() with `from` replaced by `to`.
std::string Edit(const std::string& from, const std::string& to) {
  std::string s = Valid();
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

void ExpectRejected(const std::string& text, const std::vector<std::string>& parts) {
  auto m = ParseShardManifest(text, "m.json");
  ASSERT_FALSE(m.ok()) << text;
  EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("manifest 'm.json'"), std::string::npos)
      << m.status().message();
  for (const auto& p : parts) {
    EXPECT_NE(m.status().message().find(p), std::string::npos)
        << "'" << p << "' not in: " << m.status().message();
  }
}

TEST(ShardManifest, ParsesAndFormatsRoundTrip) {
  auto m = ParseShardManifest(Valid(), "m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->table, "items");
  EXPECT_EQ(m->rows, 30u);
  EXPECT_EQ(m->dim, 4u);
  EXPECT_EQ(m->dtype, DType::kF32);
  ASSERT_EQ(m->shards.size(), 3u);
  EXPECT_EQ(m->shards[1].begin, 10u);
  EXPECT_EQ(m->shards[1].end, 25u);
  EXPECT_EQ(m->shards[1].target, "unix:/run/embstore/embstore.sock");
  EXPECT_EQ(m->shards[1].content_id, 0xffu);
  EXPECT_EQ(m->shards[2].content_id, 7u);
  EXPECT_FALSE(m->shards[0].content_id.has_value());

  for (std::string t : {"./items-0.emb", "/data/shards", "s3://bucket/shards/", "dns:///svc:7070"}) {
    auto other = ParseShardManifest(
        Edit(R"("target": "10.0.0.1:7070")", "\"target\": \"" + t + "\""), "m.json");
    ASSERT_TRUE(other.ok()) << t << ": " << other.status().ToString();
    EXPECT_EQ(other->shards[0].target, t);
    EXPECT_EQ(ShardTargetIsPath(t), t.starts_with("./") || t.starts_with("/data"));
  }

  auto again = ParseShardManifest(FormatShardManifest(*m), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(FormatShardManifest(*again), FormatShardManifest(*m));
}

TEST(ShardManifest, RejectsGapsOverlapsAndIncompleteCoverNamingTheShard) {
  ExpectRejected(Edit(R"("begin": 10, "end": 25)", R"("begin": 11, "end": 25)"),
                 {"shard 1", "begins at row 11", "shard 0 ends at row 10"});
  ExpectRejected(Edit(R"("begin": 10, "end": 25)", R"("begin": 9, "end": 25)"),
                 {"shard 1", "begins at row 9"});
  ExpectRejected(Edit(R"("begin": 0, "end": 10)", R"("begin": 1, "end": 10)"),
                 {"shard 0", "must begin at row 0"});
  ExpectRejected(Edit(R"("rows": 30)", R"("rows": 31)"), {"cover rows [0, 30)", "31 rows"});
  ExpectRejected(Edit(R"("begin": 25, "end": 30)", R"("begin": 25, "end": 25)"),
                 {"shard 2", "empty or reversed"});
}

TEST(ShardManifest, RejectsBadFieldsNamingThem) {
  ExpectRejected("[1, 2]", {"JSON object"});
  ExpectRejected("{ nope", {"not valid JSON"});
  ExpectRejected(Edit(R"("format": "embstore-shards/1")", R"("format": "v9")"),
                 {"\"format\"", "\"v9\""});
  ExpectRejected(Edit(R"("dtype": "F32")", R"("dtype": "int8")"), {"dtype", "int8"});
  ExpectRejected(Edit(R"("dim": 4)", R"("dim": 0)"), {"dim"});
  ExpectRejected(Edit(R"("rows": 30)", R"("rows": -30)"), {"rows"});
  ExpectRejected(Edit(R"("target": "host-c:7070")", R"("target": "host-c")"),
                 {"shard 2", "target", "host-c"});
  ExpectRejected(Edit(R"("target": "host-c:7070")", R"("target": "host-c:")"),
                 {"shard 2", "target"});
  ExpectRejected(Edit(R"("target": "host-c:7070")", R"("target": "s3://")"),
                 {"shard 2", "target"});
  ExpectRejected(Edit(R"("table": "items-0")", R"("tabel": "items-0")"),
                 {"shard 0", "unknown key 'tabel'"});
  ExpectRejected(Edit(R"("content_id": 7)", R"("content_id": "0xZZ")"), {"shard 2", "content_id"});
  ExpectRejected(Edit(R"("table": "items",)", R"("table": "items", "extra": 1,)"),
                 {"unknown key 'extra'"});
}

TEST(ShardManifest, AMissingFileIsNotFoundNamingIt) {
  auto m = ReadShardManifest("/nonexistent/m.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("/nonexistent/m.json"), std::string::npos);
}

// Three servers on loopback, each serving one shard of a 300,000 x 16 f32 table (19 MB, so a
// server stopped mid-load still has most of its shard to send).
class ShardedTest : public ::testing::Test {
 protected:
  static constexpr std::uint64_t kRows = 300000;
  static constexpr std::uint64_t kDim = 16;
  static constexpr std::uint64_t kBounds[4] = {0, 90000, 210000, kRows};

  void SetUp() override {
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0, 1);
    values_.resize(kRows * kDim);
    for (auto& v : values_) v = dist(rng);
    for (int i = 0; i < 3; ++i) {
      dirs_[i] = temps_[i].path();
      WriteShard(i);
      Start(i, "127.0.0.1:0");
      targets_[i] = servers_[i]->addresses()[0];
    }
    manifest_.origin = "test-manifest.json";
    manifest_.table = "items";
    manifest_.rows = kRows;
    manifest_.dim = kDim;
    manifest_.dtype = DType::kF32;
    for (int i = 0; i < 3; ++i) {
      manifest_.shards.push_back(
          {kBounds[i], kBounds[i + 1], targets_[i], "items-" + std::to_string(i), std::nullopt});
    }
  }

  void TearDown() override {
    for (int i = 0; i < 3; ++i) Stop(i);
  }

  void WriteShard(int i) {
    store::WriterOptions o;
    o.dim = kDim;
    o.dtype = DType::kF32;
    o.with_keys = true;
    o.block_rows = 512;
    auto w = store::TableWriter::Create(dirs_[i] + "/items-" + std::to_string(i) + ".emb", o);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    const std::uint64_t b = kBounds[i], e = kBounds[i + 1];
    ASSERT_TRUE((*w)->AppendRowsF32({values_.data() + b * kDim, (e - b) * kDim}).ok());
    for (std::uint64_t r = b; r < e; ++r) {
      ASSERT_TRUE((*w)->AppendKey("k" + std::to_string(r)).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }

  void Start(int i, const std::string& listen) {
    server::ServerConfig cfg;
    cfg.store_dir = dirs_[i];
    cfg.listen = {listen};
    cfg.log_level = "error";
    auto s = server::Server::Start(cfg);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    std::lock_guard<std::mutex> lock(mu_);
    servers_[i] = std::move(*s);
  }

  void Stop(int i) {
    std::unique_ptr<server::Server> s;
    {
      std::lock_guard<std::mutex> lock(mu_);
      s = std::move(servers_[i]);
    }
    if (s) s->Shutdown(std::chrono::milliseconds(0));
  }

  // The manifest written next to the shards' folders, opened with nothing contacted yet.
  std::unique_ptr<RowSource> Open(const ShardManifest& m, bool describe = false) {
    const std::string path = manifest_dir_.path() + "/test-manifest.json";
    std::ofstream(path) << FormatShardManifest(m);
    SourceOptions o;
    o.connect.rpc_timeout = std::chrono::milliseconds(5000);
    o.allow_local = allow_local_;
    o.describe_shards = describe;
    auto t = OpenShardedSource(path, o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::move(*t) : nullptr;
  }

  static ReadOptions Streamed() {
    ReadOptions o;
    o.streams = 2;
    o.chunk_bytes = 64 << 10;  // two 32 KiB checksum blocks a chunk
    o.initial_backoff = std::chrono::milliseconds(20);
    o.max_backoff = std::chrono::milliseconds(200);
    return o;
  }

  // Reads [b, e) and checks it against the logical table.
  LoadStats ExpectLoad(RowSource& t, std::uint64_t b, std::uint64_t e,
                       ReadOptions o = Streamed()) {
    std::vector<std::byte> got((e - b) * kDim * 4, std::byte{0xEE});
    auto stats = t.CopyRows(b, e, got, o);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    if (!stats.ok()) return {};
    if (!got.empty()) {  // memcmp of an empty vector's null data is undefined
      EXPECT_EQ(std::memcmp(got.data(), values_.data() + b * kDim, got.size()), 0)
          << "rows [" << b << ", " << e << ")";
    }
    EXPECT_EQ(stats->rows, e - b);
    EXPECT_EQ(stats->bytes, got.size());
    return *stats;
  }

  // The content id of shard `i`'s table, from its server.
  std::uint64_t ContentId(int i) {
    ConnectOptions c;
    c.target = targets_[i];
    auto src = OpenServerSource(c, "items-" + std::to_string(i));
    EXPECT_TRUE(src.ok()) << src.status().ToString();
    return src.ok() ? (*src)->desc().content_id : 0;
  }

  testkit::TempDir manifest_dir_{"sharded-manifest"};
  bool allow_local_ = false;  // exercise the network path, not the shared files
  std::vector<float> values_;
  testkit::TempDir temps_[3] = {testkit::TempDir("sharded-test"), testkit::TempDir("sharded-test"),
                                 testkit::TempDir("sharded-test")};
  std::string dirs_[3];
  std::string targets_[3];
  std::mutex mu_;
  std::unique_ptr<server::Server> servers_[3];
  ShardManifest manifest_;
};

TEST_F(ShardedTest, LoadsTheWholeTableFromThreeServers) {
  auto t = Open(manifest_);
  EXPECT_EQ(t->kind(), "sharded");
  auto stats = ExpectLoad(*t, 0, kRows);
  EXPECT_FALSE(stats.local);
  EXPECT_EQ(stats.streams, 6);  // two a shard
  EXPECT_EQ(stats.wire_bytes, kRows * kDim * 4);
  EXPECT_EQ(t->transferred_bytes(), kRows * kDim * 4);
}

TEST_F(ShardedTest, LoadsAnyRowRangeFromOnlyTheShardsItOverlaps) {
  auto t = Open(manifest_);
  ExpectLoad(*t, 89999, 90001);      // across the first boundary
  ExpectLoad(*t, 1, kRows - 1);      // unaligned at both ends, all shards
  ExpectLoad(*t, 210000, kRows);     // exactly one shard
  auto empty = ExpectLoad(*t, 500, 500);
  EXPECT_EQ(empty.streams, 0);
  // With shards 0 and 2 gone, a range inside shard 1 still reads, from a new source too.
  Stop(0);
  Stop(2);
  ReadOptions once = Streamed();
  once.max_attempts = 1;
  ExpectLoad(*t, 91000, 99000, once);
  auto fresh = Open(manifest_);
  auto inside = ExpectLoad(*fresh, 91000, 99000, once);
  EXPECT_EQ(inside.wire_bytes, 8000 * kDim * 4);
  std::vector<std::byte> across((90001 - 89999) * kDim * 4);
  EXPECT_EQ(fresh->CopyRows(89999, 90001, across, once).status().code(),
            StatusCode::kUnavailable);
}

TEST_F(ShardedTest, LocalFastPathWorksPerShard) {
  allow_local_ = true;  // the shard files are on this host
  auto t = Open(manifest_);
  auto stats = ExpectLoad(*t, 100, 290000);
  EXPECT_TRUE(stats.local);
  EXPECT_EQ(stats.wire_bytes, 0u);
  EXPECT_EQ(t->transferred_bytes(), 0u);
}

TEST_F(ShardedTest, ConvertsToF32PerShardAndRejectsAWrongBuffer) {
  auto t = Open(manifest_);
  ReadOptions o = Streamed();
  o.to_f32 = true;  // F32 already: the same bytes
  ExpectLoad(*t, 0, kRows, o);
  std::vector<std::byte> small(100);
  auto st = t->CopyRows(0, kRows, small, Streamed());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t->OutputBytes(0, kRows + 1, false).status().code(), StatusCode::kOutOfRange);
}

// A shard need not be on a server: a table file next to the manifest (a relative path), and a
// store directory, sit in one manifest with a server.
TEST_F(ShardedTest, ShardsCanBeFilesAndDirectoriesNextToServers) {
  ShardManifest m = manifest_;
  namespace fs = std::filesystem;
  fs::copy_file(dirs_[0] + "/items-0.emb", manifest_dir_.path() + "/items-0.emb");
  m.shards[0].target = "./items-0.emb";
  m.shards[2].target = dirs_[2];
  allow_local_ = false;
  auto t = Open(m, /*describe=*/true);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->desc().has_keys);
  auto stats = ExpectLoad(*t, 0, kRows);
  EXPECT_EQ(stats.wire_bytes, (kBounds[2] - kBounds[1]) * kDim * 4);  // only shard 1 streamed
  auto keys = t->Keys(89999, 210001);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->front(), "k89999");
  EXPECT_EQ(keys->back(), "k210000");
  std::vector<std::string> wanted = {"k5", "k299999", "nope", "k150000"};
  std::vector<float> rows(wanted.size() * kDim, -1.0f);
  auto found = t->CopyKeys(wanted, std::as_writable_bytes(std::span<float>(rows)), Streamed());
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->missing, (std::vector<std::uint32_t>{2}));
  EXPECT_EQ(std::memcmp(&rows[0], &values_[5 * kDim], kDim * 4), 0);
  EXPECT_EQ(std::memcmp(&rows[kDim], &values_[299999 * kDim], kDim * 4), 0);
  EXPECT_EQ(std::memcmp(&rows[3 * kDim], &values_[150000 * kDim], kDim * 4), 0);

  // A file named by a shard must hold the shard's table; another manifest is not a shard.
  m.shards[0].table = "other";
  auto wrong = Open(m);
  std::vector<std::byte> got(10 * kDim * 4);
  auto st = wrong->CopyRows(0, 10, got, Streamed());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << st.status().ToString();
  EXPECT_NE(st.status().message().find("shard 0"), std::string::npos) << st.status().message();
  std::ofstream(manifest_dir_.path() + "/inner.json") << FormatShardManifest(manifest_);
  m.shards[0] = manifest_.shards[0];
  m.shards[0].target = "./inner.json";
  auto nested = Open(m);
  st = nested->CopyRows(0, 10, got, Streamed());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument) << st.status().ToString();
  EXPECT_NE(st.status().message().find("cannot be another manifest"), std::string::npos)
      << st.status().message();
}

TEST_F(ShardedTest, WaitsForAServerThatIsDownWhenTheLoadStartsAndComesBack) {
  Stop(1);
  std::thread restarter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    Start(1, targets_[1]);
  });
  auto t = Open(manifest_);
  ReadOptions o = Streamed();
  o.max_attempts = 50;  // 20, 40, ... 200 ms apart: several seconds of waiting
  std::vector<LoadEvent> events;
  o.on_event = [&](const LoadEvent& e) { events.push_back(e); };
  ExpectLoad(*t, 0, kRows, o);
  restarter.join();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].kind, LoadEvent::Kind::kResume);
  EXPECT_EQ(events[0].stream, 1);
  EXPECT_NE(events[0].message.find("shard 1"), std::string::npos) << events[0].message;
  EXPECT_NE(events[0].message.find("unreachable"), std::string::npos) << events[0].message;
  EXPECT_NE(events[0].message.find(targets_[1]), std::string::npos) << events[0].message;
}

TEST_F(ShardedTest, ResumesAShardWhoseServerIsRestartedMidLoad) {
  // A last shard of 64 MB, so that most of it is still to come when its server is killed,
  // whatever the socket and HTTP/2 buffers hold.
  constexpr std::uint64_t kBigRows = 1000000;
  auto value = [](std::uint64_t r, std::uint64_t c) {
    return static_cast<float>((r * 131 + c * 17) % 10007) / 16.0f;
  };
  {
    store::WriterOptions wo;
    wo.dim = kDim;
    wo.block_rows = 512;
    auto w = store::TableWriter::Create(dirs_[2] + "/big-2.emb", wo);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    std::vector<float> rows(10000 * kDim);
    for (std::uint64_t b = 0; b < kBigRows; b += 10000) {
      for (std::uint64_t i = 0; i < rows.size(); ++i) rows[i] = value(b + i / kDim, i % kDim);
      ASSERT_TRUE((*w)->AppendRowsF32(rows).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
    ASSERT_TRUE(servers_[2]->RefreshCatalog().ok());
  }
  ShardManifest m = manifest_;
  m.rows = kBounds[2] + kBigRows;
  m.shards[2] = {kBounds[2], m.rows, targets_[2], "big-2", std::nullopt};
  auto t = Open(m);

  std::atomic<int> chunks{0};
  std::thread restarter;
  ReadOptions o = Streamed();
  o.after_chunk = [&](int shard, std::uint64_t first_row) {
    EXPECT_GE(first_row, m.shards[shard].begin);
    EXPECT_LT(first_row, m.shards[shard].end);
    if (shard == 2 && ++chunks == 20) {
      Stop(2);
      restarter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        Start(2, targets_[2]);
      });
    }
  };
  std::vector<float> got(m.rows * kDim);
  auto stats = t->CopyRows(0, m.rows, std::as_writable_bytes(std::span<float>(got)), o);
  if (restarter.joinable()) restarter.join();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GE(stats->resumes, 1);
  EXPECT_EQ(std::memcmp(got.data(), values_.data(), kBounds[2] * kDim * 4), 0);
  for (std::uint64_t r = 0; r < kBigRows; r += 997) {
    for (std::uint64_t c = 0; c < kDim; ++c) {
      ASSERT_EQ(got[(kBounds[2] + r) * kDim + c], value(r, c)) << "row " << r;
    }
  }
  // Verified rows were not fetched again: at most what was in flight at the kill.
  EXPECT_LT(stats->wire_bytes, m.rows * kDim * 4 * 3 / 2);
}

TEST_F(ShardedTest, FailsNamingTheShardAndTargetWhenAServerNeverComesBack) {
  Stop(2);
  auto t = Open(manifest_);
  ReadOptions o = Streamed();
  o.max_attempts = 3;
  std::vector<std::byte> got(kRows * kDim * 4);
  auto st = t->CopyRows(0, kRows, got, o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable) << st.status().ToString();
  const std::string msg = st.status().message();
  EXPECT_NE(msg.find("test-manifest.json' shard 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("items-2"), std::string::npos) << msg;
  EXPECT_NE(msg.find(targets_[2]), std::string::npos) << msg;
  EXPECT_NE(msg.find("gave up after 3 attempts"), std::string::npos) << msg;

  // A range that does not touch the missing shard still loads.
  ExpectLoad(*t, 0, kBounds[2]);
  // Opening with every shard described fails at once, naming the shard.
  SourceOptions so;
  so.connect.rpc_timeout = std::chrono::milliseconds(2000);
  auto described = OpenShardedSource(manifest_dir_.path() + "/test-manifest.json", so);
  ASSERT_FALSE(described.ok());
  EXPECT_NE(described.status().message().find("shard 2"), std::string::npos)
      << described.status().message();
}

TEST_F(ShardedTest, RejectsServersWhoseTablesDoNotMatchTheManifest) {
  ShardManifest wrong_rows = manifest_;
  wrong_rows.rows += 5;
  wrong_rows.shards[2].end += 5;
  auto t = Open(wrong_rows);
  std::vector<std::byte> got(wrong_rows.rows * kDim * 4);
  auto st = t->CopyRows(0, wrong_rows.rows, got, Streamed());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.status().message().find("shard 2"), std::string::npos) << st.status().message();
  EXPECT_NE(st.status().message().find("rows 90000, the manifest says 90005"), std::string::npos)
      << st.status().message();

  ShardManifest wrong_dim = manifest_;
  wrong_dim.dim = 8;
  const std::string path = manifest_dir_.path() + "/dim.json";
  std::ofstream(path) << FormatShardManifest(wrong_dim);
  auto d = OpenShardedSource(path);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("dim 16, the manifest says 8"), std::string::npos)
      << d.status().message();

  ShardManifest pinned = manifest_;
  for (int i = 0; i < 3; ++i) pinned.shards[i].content_id = ContentId(i);
  ExpectLoad(*Open(pinned), 0, kRows);  // the right versions load
  pinned.shards[0].content_id = *pinned.shards[0].content_id ^ 1;
  std::vector<std::byte> all(kRows * kDim * 4);
  auto st3 = Open(pinned)->CopyRows(0, kRows, all, Streamed());
  ASSERT_FALSE(st3.ok());
  EXPECT_EQ(st3.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st3.status().message().find("content_id"), std::string::npos) << st3.status().message();
}

TEST_F(ShardedTest, KeysComeFromEveryOverlappingShardInRowOrder) {
  auto t = Open(manifest_, /*describe=*/true);
  auto keys = t->Keys(89990, 210010);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 210010u - 89990u);
  EXPECT_EQ(keys->front(), "k89990");
  EXPECT_EQ((*keys)[10], "k90000");
  EXPECT_EQ(keys->back(), "k210009");
  EXPECT_EQ(t->Keys(0, kRows + 1).status().code(), StatusCode::kOutOfRange);
}

TEST_F(ShardedTest, CancelStopsEveryShard) {
  auto t = Open(manifest_);
  CancelToken cancel;
  ReadOptions o = Streamed();
  o.cancel = &cancel;
  o.after_chunk = [&](int, std::uint64_t) { cancel.Cancel(); };
  std::vector<std::byte> got(kRows * kDim * 4);
  auto st = t->CopyRows(0, kRows, got, o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kCancelled) << st.status().ToString();
}

}  // namespace
}  // namespace embstore::client
