// Sharded tables: the manifest parser's checks, and loads from three real servers on loopback
// (in-process), including a server that is down when the load starts and comes back, one killed
// and restarted mid-load, and one that never comes back.
#include "embstore/client/sharded.h"
#include "embstore/testkit/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <filesystem>
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

  std::unique_ptr<ShardedTable> Open(ShardManifest m) {
    ConnectOptions c;
    c.rpc_timeout = std::chrono::milliseconds(5000);
    auto t = ShardedTable::Open(std::move(m), c);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return std::move(*t);
  }

  static LoadOptions Streamed() {
    LoadOptions o;
    o.allow_local = false;  // exercise the network path, not the shared files
    o.streams = 2;
    o.chunk_bytes = 64 << 10;  // two 32 KiB checksum blocks a chunk
    o.initial_backoff = std::chrono::milliseconds(20);
    o.max_backoff = std::chrono::milliseconds(200);
    return o;
  }

  // Loads [b, e) and checks it against the logical table.
  ShardedLoadStats ExpectLoad(ShardedTable& t, std::uint64_t b, std::uint64_t e,
                              LoadOptions o = Streamed()) {
    o.begin_row = b;
    o.end_row = e;
    std::vector<std::byte> got((e - b) * kDim * 4, std::byte{0xEE});
    auto stats = t.Load(got, o);
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
  auto stats = ExpectLoad(*t, 0, kRows);
  ASSERT_EQ(stats.shards.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(stats.shards[i].shard, i);
    EXPECT_EQ(stats.shards[i].begin, kBounds[i]);
    EXPECT_EQ(stats.shards[i].end, kBounds[i + 1]);
    EXPECT_FALSE(stats.shards[i].stats.local);
  }
  EXPECT_EQ(stats.wire_bytes, kRows * kDim * 4);
}

TEST_F(ShardedTest, LoadsAnyRowRangeFromOnlyTheShardsItOverlaps) {
  auto t = Open(manifest_);
  auto inside = ExpectLoad(*t, 91000, 99000);  // inside shard 1
  ASSERT_EQ(inside.shards.size(), 1u);
  EXPECT_EQ(inside.shards[0].shard, 1);
  auto two = ExpectLoad(*t, 89999, 90001);  // across the first boundary
  ASSERT_EQ(two.shards.size(), 2u);
  EXPECT_EQ(two.shards[0].end, 90000u);
  EXPECT_EQ(two.shards[1].begin, 90000u);
  auto three = ExpectLoad(*t, 1, kRows - 1);  // unaligned at both ends, all shards
  EXPECT_EQ(three.shards.size(), 3u);
  auto last = ExpectLoad(*t, 210000, kRows);  // exactly one shard
  ASSERT_EQ(last.shards.size(), 1u);
  EXPECT_EQ(last.shards[0].shard, 2);
  auto empty = ExpectLoad(*t, 500, 500);
  EXPECT_TRUE(empty.shards.empty());
}

TEST_F(ShardedTest, LocalFastPathWorksPerShard) {
  auto t = Open(manifest_);
  LoadOptions o = Streamed();
  o.allow_local = true;  // the shard files are on this host
  auto stats = ExpectLoad(*t, 100, 290000, o);
  for (const auto& s : stats.shards) EXPECT_TRUE(s.stats.local);
}

TEST_F(ShardedTest, ConvertsToF32PerShardAndRejectsAWrongBuffer) {
  auto t = Open(manifest_);
  LoadOptions o = Streamed();
  o.to_f32 = true;  // F32 already: the same bytes
  ExpectLoad(*t, 0, kRows, o);
  std::vector<std::byte> small(100);
  auto st = t->Load(small, Streamed());
  EXPECT_EQ(st.status().code(), StatusCode::kInvalidArgument);
  LoadOptions past = Streamed();
  past.end_row = kRows + 1;
  EXPECT_EQ(t->OutputBytes(past).status().code(), StatusCode::kOutOfRange);
}

TEST_F(ShardedTest, WaitsForAServerThatIsDownWhenTheLoadStartsAndComesBack) {
  Stop(1);
  std::thread restarter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    Start(1, targets_[1]);
  });
  auto t = Open(manifest_);
  LoadOptions o = Streamed();
  o.max_attempts = 50;  // 20, 40, ... 200 ms apart: several seconds of waiting
  std::vector<LoadEvent> events;
  o.on_event = [&](const LoadEvent& e) { events.push_back(e); };
  auto stats = ExpectLoad(*t, 0, kRows, o);
  restarter.join();
  EXPECT_GE(stats.unreachable_retries, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].kind, LoadEvent::Kind::kResume);
  EXPECT_EQ(events[0].stream, 1);
  EXPECT_NE(events[0].message.find("shard 1"), std::string::npos) << events[0].message;
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
  LoadOptions o = Streamed();
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
  auto stats = t->Load(std::as_writable_bytes(std::span<float>(got)), o);
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
  LoadOptions o = Streamed();
  o.max_attempts = 3;
  std::vector<std::byte> got(kRows * kDim * 4);
  auto st = t->Load(got, o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable) << st.status().ToString();
  const std::string msg = st.status().message();
  EXPECT_NE(msg.find("manifest 'test-manifest.json' shard 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("items-2"), std::string::npos) << msg;
  EXPECT_NE(msg.find(targets_[2]), std::string::npos) << msg;
  EXPECT_NE(msg.find("gave up after 3 attempts"), std::string::npos) << msg;

  // A range that does not touch the missing shard still loads.
  ExpectLoad(*t, 0, kBounds[2]);
}

TEST_F(ShardedTest, RejectsServersWhoseTablesDoNotMatchTheManifest) {
  ShardManifest wrong_rows = manifest_;
  wrong_rows.rows += 5;
  wrong_rows.shards[2].end += 5;
  auto t = Open(wrong_rows);
  std::vector<std::byte> got(wrong_rows.rows * kDim * 4);
  auto st = t->Load(got, Streamed());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.status().message().find("shard 2"), std::string::npos) << st.status().message();
  EXPECT_NE(st.status().message().find("rows 90000, the manifest says 90005"), std::string::npos)
      << st.status().message();

  ShardManifest wrong_dim = manifest_;
  wrong_dim.dim = 8;
  auto t2 = Open(wrong_dim);
  auto d = t2->DescribeShards();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("dim 16, the manifest says 8"), std::string::npos)
      << d.status().message();

  ShardManifest pinned = manifest_;
  auto descs = Open(manifest_)->DescribeShards();
  ASSERT_TRUE(descs.ok()) << descs.status().ToString();
  for (int i = 0; i < 3; ++i) pinned.shards[i].content_id = (*descs)[i].content_id;
  ExpectLoad(*Open(pinned), 0, kRows);  // the right versions load
  pinned.shards[0].content_id = (*descs)[0].content_id ^ 1;
  std::vector<std::byte> all(kRows * kDim * 4);
  auto st3 = Open(pinned)->Load(all, Streamed());
  ASSERT_FALSE(st3.ok());
  EXPECT_EQ(st3.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st3.status().message().find("content_id"), std::string::npos) << st3.status().message();
}

TEST_F(ShardedTest, KeysComeFromEveryOverlappingShardInRowOrder) {
  auto t = Open(manifest_);
  auto keys = t->Keys(89990, 210010);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  ASSERT_EQ(keys->size(), 210010u - 89990u);
  EXPECT_EQ(keys->front(), "k89990");
  EXPECT_EQ((*keys)[10], "k90000");
  EXPECT_EQ(keys->back(), "k210009");
}

TEST_F(ShardedTest, CancelStopsEveryShard) {
  auto t = Open(manifest_);
  CancelToken cancel;
  LoadOptions o = Streamed();
  o.cancel = &cancel;
  o.after_chunk = [&](int, std::uint64_t) { cancel.Cancel(); };
  std::vector<std::byte> got(kRows * kDim * 4);
  auto st = t->Load(got, o);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kCancelled) << st.status().ToString();
}

}  // namespace
}  // namespace embstore::client
