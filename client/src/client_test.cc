// Client and the streamed reads of a server's rows (internal::StreamRows, what the server source
// reads through) against the real server, in-process, on ephemeral loopback ports, with fault
// injection: a server killed and restarted mid-load, a chunk corrupted at the source, a server
// that never comes back, bad targets, unknown tables, wrong tokens, and cancellation.
#include "embstore/client/client.h"
#include "embstore/client/row_source.h"
#include "embstore/store/checksum.h"
#include "embstore/testkit/temp_dir.h"
#include "embstore/v1/embstore.grpc.pb.h"

#include <absl/base/internal/cycleclock.h>
#include <grpcpp/grpcpp.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <random>
#include <thread>

#include "embstore/server/server.h"
#include "sources.h"
#include "test_tables.h"
#include "embstore/store/writer.h"

namespace embstore::client {
namespace {

using store::DType;

using testkit::TempDir;

// A streamed read of rows [begin_row, end_row) of a table named per call.
struct LoadOptions : ReadOptions {
  std::uint64_t begin_row = 0;
  std::optional<std::uint64_t> end_row;  // default: the table's last row
};

// Describes `table`, then streams the range of that version: what a server source's CopyRows
// does when the server's file is not this host's.
Result<LoadStats> Load(Client& c, const std::string& table, std::span<std::byte> out,
                       const LoadOptions& o = {}) {
  EMBSTORE_ASSIGN_OR_RETURN(TableDesc desc, c.Describe(table));
  return internal::StreamRows(c, desc, o.begin_row, o.end_row.value_or(desc.rows), out, o);
}

// Random f32 values rounded to `dtype`, returned as the encoded bytes the table holds.
std::vector<std::byte> WriteTable(const std::string& path, std::uint64_t rows, std::uint64_t dim,
                                  DType dtype, bool keys, std::uint64_t block_rows,
                                  unsigned seed = 1) {
  return testing::WriteRandomTable(path, rows, dim, dtype, keys, block_rows, seed);
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer("127.0.0.1:0"); }

  void StartServer(const std::string& listen, std::vector<std::string> tokens = {}) {
    auto s = testing::StartTestServer(dir_.path(), listen, std::move(tokens));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    target_ = server_->addresses()[0];
  }

  void StopServer() {
    if (server_) server_->Shutdown(std::chrono::milliseconds(0));
    server_.reset();
  }

  void TearDown() override { StopServer(); }

  std::unique_ptr<Client> Connect(std::string token = "") {
    ConnectOptions o;
    o.target = target_;
    o.token = std::move(token);
    auto c = Client::Connect(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }

  // Adds a table file to the served directory and makes the server see it.
  std::vector<std::byte> AddTable(const std::string& name, std::uint64_t rows, std::uint64_t dim,
                                  DType dtype = DType::kF32, bool keys = false,
                                  std::uint64_t block_rows = 64) {
    auto bytes = WriteTable(dir_.path() + "/" + name + ".emb", rows, dim, dtype, keys, block_rows);
    EXPECT_TRUE(server_->RefreshCatalog().ok());
    return bytes;
  }

  void LoadThroughARestart(std::uint64_t chunk_bytes, bool to_f32);
  Result<LoadStats> LoadWhileTheServerDies(LoadOptions o);

  static LoadOptions Streamed(int streams = 2) {
    LoadOptions o;
    o.streams = streams;
    o.initial_backoff = std::chrono::milliseconds(20);
    o.max_backoff = std::chrono::milliseconds(200);
    return o;
  }

  TempDir dir_;
  std::unique_ptr<server::Server> server_;
  std::string target_;
};

TEST_F(ClientTest, ListsAndDescribesTables) {
  AddTable("alpha", 10, 4, DType::kF16, true);
  AddTable("beta", 3, 2);
  auto c = Connect();
  auto tables = c->ListTables();
  ASSERT_TRUE(tables.ok()) << tables.status().ToString();
  ASSERT_EQ(tables->size(), 2u);
  EXPECT_EQ((*tables)[0].name, "alpha");
  EXPECT_EQ((*tables)[0].dtype, DType::kF16);
  EXPECT_EQ((*tables)[1].rows, 3u);
  auto d = c->Describe("alpha");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->dim, 4u);
  EXPECT_TRUE(d->has_keys);
  EXPECT_EQ(d->metadata.at("origin"), "client tests");
  ASSERT_TRUE(d->file.has_value());
}

TEST_F(ClientTest, StreamsWholeTablesBitIdenticalWithAnyStreamCount) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::string name = "t" + std::to_string(static_cast<int>(dt));
    auto want = AddTable(name, 5000, 24, dt, false, 100);
    auto c = Connect();
    for (int streams : {1, 3, 8}) {
      std::vector<std::byte> got(want.size());
      auto stats = Load(*c, name, got, Streamed(streams));
      ASSERT_TRUE(stats.ok()) << stats.status().ToString();
      EXPECT_FALSE(stats->local);
      EXPECT_EQ(stats->streams, streams);
      EXPECT_EQ(stats->bytes, want.size());
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0) << name << " " << streams;
    }
  }
}

TEST_F(ClientTest, LoadsUnalignedRowRangesWithSmallChunks) {
  auto want = AddTable("t", 1000, 5, DType::kF32, false, 64);
  auto c = Connect();
  LoadOptions o = Streamed(3);
  o.begin_row = 37;
  o.end_row = 901;
  o.chunk_bytes = 7 * 20;  // 7 rows: chunks are pieces of blocks, checked by payload checksums
  std::vector<std::byte> got((901 - 37) * 20);
  auto stats = Load(*c, "t", got, o);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(std::memcmp(got.data(), want.data() + 37 * 20, got.size()), 0);
}

TEST_F(ClientTest, ConvertsHalfTypesToF32OnTheFly) {
  auto want = AddTable("h", 300, 16, DType::kBF16, false, 50);
  auto c = Connect();
  LoadOptions o = Streamed(2);
  o.to_f32 = true;
  std::vector<float> got(300 * 16);
  auto stats = Load(*c, "h", std::as_writable_bytes(std::span<float>(got)), o);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  for (std::size_t i = 0; i < got.size(); ++i) {
    std::uint16_t b;
    std::memcpy(&b, want.data() + 2 * i, 2);
    ASSERT_EQ(got[i], store::BF16ToF32(b)) << i;
  }
}

TEST_F(ClientTest, RejectsWrongBufferSizeAndBadRanges) {
  AddTable("t", 10, 4);
  auto c = Connect();
  std::vector<std::byte> small(10);
  EXPECT_EQ(Load(*c, "t", small).status().code(), StatusCode::kInvalidArgument);
  LoadOptions o;
  o.end_row = 11;
  EXPECT_EQ(Load(*c, "t", small, o).status().code(), StatusCode::kOutOfRange);
}

TEST_F(ClientTest, UsesTheLocalFileWhenItIsTheServersFile) {
  auto want = AddTable("t", 400, 8);
  auto c = Connect();
  std::vector<std::byte> got(want.size());
  std::vector<LoadEvent> events;
  ReadOptions o;
  o.on_event = [&](const LoadEvent& e) { events.push_back(e); };
  ConnectOptions co;
  co.target = target_;
  auto src = OpenServerSource(co, "t");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_NE((*src)->local_table(), nullptr);
  auto stats = (*src)->CopyRows(0, 400, got, o);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_TRUE(stats->local);
  EXPECT_EQ(stats->wire_bytes, 0u);
  EXPECT_EQ(got, want);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].kind, LoadEvent::Kind::kLocal);

  auto desc = *c->Describe("t");
  auto mapped = c->OpenLocal(desc);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  EXPECT_EQ((*mapped)->rows(), 400u);
  desc.file->identity.inode += 1;  // another host's file, or a replaced one
  EXPECT_EQ(c->OpenLocal(desc).status().code(), StatusCode::kNotFound);
}

// Loads a 51 MB table while the server is killed after `kill_after` chunks and brought back on
// the same address 300 ms later; the load must complete with identical bytes.
void ClientTest::LoadThroughARestart(std::uint64_t chunk_bytes, bool to_f32) {
  // Large enough that most of it is still to come when the server dies, whatever the socket
  // and HTTP/2 buffers hold.
  const std::string name = "t" + std::to_string(chunk_bytes) + (to_f32 ? "h" : "");
  auto want = AddTable(name, 200000, 64, to_f32 ? DType::kF16 : DType::kF32, false, 4096);
  const std::string addr = target_;
  auto c = Connect();
  std::vector<std::byte> got(200000 * 64 * 4);
  std::atomic<int> chunks{0};
  std::thread restarter;
  LoadOptions o = Streamed(2);
  o.chunk_bytes = chunk_bytes;
  o.to_f32 = to_f32;
  // Room for a slow restart on a busy machine: the restarted server must come back within the
  // retry budget (about 20 s here), whatever the load.
  o.max_attempts = 100;
  o.after_chunk = [&](int, std::uint64_t) {
    if (++chunks == 10) {
      StopServer();
      restarter = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        StartServer(addr);
      });
    }
  };
  auto stats = Load(*c, name, got, o);
  if (restarter.joinable()) restarter.join();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GE(stats->resumes, 1);
  if (to_f32) {
    for (std::size_t i = 0; i < want.size() / 2; i += 997) {
      std::uint16_t h;
      float f;
      std::memcpy(&h, want.data() + 2 * i, 2);
      std::memcpy(&f, got.data() + 4 * i, 4);
      ASSERT_EQ(f, store::F16ToF32(h)) << i;
    }
  } else {
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
  }
  // Nothing verified was fetched twice: at most what was in flight, and the unverified start of
  // a block that was arriving in pieces.
  EXPECT_LT(stats->wire_bytes, want.size() + want.size() / 2);
}

TEST_F(ClientTest, ResumesAfterTheServerIsKilledAndRestarted) {
  LoadThroughARestart(/*chunk_bytes=*/0, /*to_f32=*/false);
}

TEST_F(ClientTest, ResumesFromTheLastVerifiedBlockWhenChunksArePiecesOfBlocks) {
  // 256 KiB chunks of 1 MiB blocks: the server dies with a block partly received, whose rows
  // cannot be verified yet; the load resumes at that block's start and verifies it whole.
  LoadThroughARestart(/*chunk_bytes=*/256 << 10, /*to_f32=*/false);
  LoadThroughARestart(/*chunk_bytes=*/256 << 10, /*to_f32=*/true);
}

TEST_F(ClientTest, DetectsACorruptChunkAndFetchesItAgain) {
  auto want = AddTable("t", 1000, 4, DType::kF32, false, 50);
  const std::string file = dir_.path() + "/t.emb";
  const std::uint64_t data_offset = (*store::Table::Open(file))->data_offset();
  const std::uint64_t at = data_offset + 777 * 16 + 5;  // block 15
  int fd = ::open(file.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char orig, bad;
  ASSERT_EQ(::pread(fd, &orig, 1, at), 1);
  bad = orig ^ 0x5A;
  ASSERT_EQ(::pwrite(fd, &bad, 1, at), 1);  // the server's mapping now serves a wrong byte

  auto c = Connect();
  std::vector<std::byte> got(want.size());
  std::vector<LoadEvent> events;
  LoadOptions o = Streamed(2);
  o.on_event = [&](const LoadEvent& e) {
    events.push_back(e);
    if (e.kind == LoadEvent::Kind::kBadChunk) {
      EXPECT_NE(e.message.find("block 15 (rows [750, 800))"), std::string::npos) << e.message;
      EXPECT_EQ(::pwrite(fd, &orig, 1, at), 1);  // the next fetch gets the right byte
    }
  };
  // The retry has to wait for the calling thread to deliver the event; give it time.
  o.initial_backoff = std::chrono::milliseconds(400);
  auto stats = Load(*c, "t", got, o);
  ::close(fd);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_GE(stats->bad_chunks, 1);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size()), 0);
}

TEST_F(ClientTest, PersistentCorruptionFailsNamingTheBlock) {
  AddTable("t", 1000, 4, DType::kF32, false, 50);
  const std::string file = dir_.path() + "/t.emb";
  const std::uint64_t at = (*store::Table::Open(file))->data_offset() + 10 * 16;
  int fd = ::open(file.c_str(), O_RDWR);
  unsigned char b = 0x77;
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);
  auto c = Connect();
  std::vector<std::byte> got(1000 * 16);
  LoadOptions o = Streamed(1);
  o.max_attempts = 3;
  o.initial_backoff = std::chrono::milliseconds(1);
  auto stats = Load(*c, "t", got, o);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kCorruption);
  EXPECT_NE(stats.status().message().find("block 0 (rows [0, 50))"), std::string::npos)
      << stats.status().message();
}

// Loads a 51 MB table with one stream while the server goes away for good after the first chunk.
Result<LoadStats> ClientTest::LoadWhileTheServerDies(LoadOptions o) {
  AddTable("t", 200000, 64, DType::kF32, false, 4096);
  auto c = Connect();
  std::vector<std::byte> got(200000 * 256);
  o.after_chunk = [&](int, std::uint64_t row) {
    if (row == 0) StopServer();
  };
  return Load(*c, "t", got, o);
}

TEST_F(ClientTest, GivesUpClearlyWhenTheServerNeverComesBack) {
  LoadOptions o = Streamed(1);
  o.max_attempts = 3;
  o.initial_backoff = std::chrono::milliseconds(10);
  auto stats = LoadWhileTheServerDies(o);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(stats.status().message().find("gave up at row"), std::string::npos)
      << stats.status().message();
  EXPECT_NE(stats.status().message().find(target_), std::string::npos) << stats.status().message();
}

TEST_F(ClientTest, DeadlinePassesWhileTheServerIsDown) {
  LoadOptions o = Streamed(1);
  o.max_attempts = 1000;
  o.timeout = std::chrono::milliseconds(1500);
  auto stats = LoadWhileTheServerDies(o);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kDeadlineExceeded) << stats.status().ToString();
}

TEST_F(ClientTest, CancelsMidLoad) {
  AddTable("t", 200000, 64, DType::kF32, false, 4096);
  auto c = Connect();
  std::vector<std::byte> got(200000 * 256);
  CancelToken cancel;
  LoadOptions o = Streamed(2);
  o.cancel = &cancel;
  o.after_chunk = [&](int, std::uint64_t) { cancel.Cancel(); };
  auto stats = Load(*c, "t", got, o);
  EXPECT_EQ(stats.status().code(), StatusCode::kCancelled) << stats.status().ToString();
  // A progress callback returning false cancels too.
  LoadOptions p = Streamed(2);
  p.progress = [](std::uint64_t, std::uint64_t) { return false; };
  p.after_chunk = [](int, std::uint64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  EXPECT_EQ(Load(*c, "t", got, p).status().code(), StatusCode::kCancelled);
}

// gRPC 1.51 reads errno after other work following connect(); absl's first cycle-clock reading in
// a process leaves ENOENT there on machines without tsc_freq_khz, and a stream then failed to
// connect with "No such file or directory" (grpc_util.cc). Connect takes that first reading, so
// no later one changes errno. Run in a fresh process (death-test style), where nothing has
// read the clock yet.
TEST(ClientConnect, LeavesNoFirstClockReadingToSetErrnoDuringAConnect) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ConnectOptions o;
        o.target = "127.0.0.1:1";
        auto c = Client::Connect(o);
        errno = 0;
        (void)absl::base_internal::CycleClock::Frequency();
        std::exit(c.ok() && errno == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ClientTest, ClearErrorsForBadTargetsAndUnknownTables) {
  ConnectOptions bad;
  bad.target = "no-port-here";
  EXPECT_EQ(Client::Connect(bad).status().code(), StatusCode::kInvalidArgument);
  ConnectOptions dead;
  dead.target = "127.0.0.1:1";
  dead.rpc_timeout = std::chrono::milliseconds(2000);
  auto c = *Client::Connect(dead);
  auto d = c->Describe("t");
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable) << d.status().ToString();
  EXPECT_NE(d.status().message().find("127.0.0.1:1"), std::string::npos);

  auto good = Connect();
  auto u = good->Describe("nope");
  EXPECT_EQ(u.status().code(), StatusCode::kNotFound);
  EXPECT_NE(u.status().message().find("nope"), std::string::npos) << u.status().message();
  EXPECT_EQ(good->Describe("../etc/passwd").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, LoadBalancingPolicyIsValidatedAndUsable) {
  auto want = AddTable("t", 500, 4);
  ConnectOptions o;
  o.target = "dns:///" + target_;
  o.load_balancing = "round_robin";
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<std::byte> got(want.size());
  ASSERT_TRUE(Load(**c, "t", got, Streamed(2)).ok());
  EXPECT_EQ(got, want);
  o.load_balancing = "least_loaded";
  auto bad = Client::Connect(o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("least_loaded"), std::string::npos);
}

TEST_F(ClientTest, TokensAreCheckedByTheServer) {
  StopServer();
  StartServer("127.0.0.1:0", {"s3cret"});
  AddTable("t", 10, 4);
  auto none = Connect()->Describe("t");
  EXPECT_EQ(none.status().code(), StatusCode::kUnauthenticated) << none.status().ToString();
  auto wrong = Connect("guess")->Describe("t");
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(Connect("s3cret")->Describe("t").ok());
}

TEST_F(ClientTest, LooksUpRowsAndKeysAndReportsMissingKeys) {
  auto want = AddTable("t", 100, 4, DType::kF32, true, 16);
  auto c = Connect();
  std::vector<std::uint64_t> ids = {5, 0, 99};
  auto r = c->LookupRows("t", ids);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rows, ids);
  EXPECT_EQ(std::memcmp(r->data.data() + 16, want.data(), 16), 0);
  EXPECT_EQ(c->LookupRows("t", std::vector<std::uint64_t>{100}).status().code(),
            StatusCode::kOutOfRange);

  std::vector<std::string> keys = {"key7", "missing", "key42", "nope"};
  auto k = c->LookupKeys("t", keys);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->rows, (std::vector<std::uint64_t>{7, 42}));
  EXPECT_EQ(k->missing, (std::vector<std::uint32_t>{1, 3}));
  EXPECT_EQ(std::memcmp(k->data.data(), want.data() + 7 * 16, 16), 0);

  auto all = c->Keys("t");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 100u);
  EXPECT_EQ((*all)[42], "key42");
  auto some = c->Keys("t", 10, 12);
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(*some, (std::vector<std::string>{"key10", "key11"}));
}

TEST_F(ClientTest, LargeLookupsAreSplitIntoBatches) {
  auto want = AddTable("t", 40000, 64, DType::kF32, false, 1000);
  auto c = Connect();
  std::vector<std::uint64_t> ids(40000);
  for (std::uint64_t i = 0; i < ids.size(); ++i) ids[i] = ids.size() - 1 - i;
  auto r = c->LookupRows("t", ids);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->data.size(), want.size());
  EXPECT_EQ(std::memcmp(r->data.data(), want.data() + (40000 - 1) * 256, 256), 0);
}

// Rows by id straight into the caller's buffer, in batches several at a time: every row lands
// where its id's position says (ids reversed, repeated, and more than one batch of 1 MiB), and
// a bad id, another version or a wrong buffer is a clear error.
TEST_F(ClientTest, LookupRowsIntoFillsTheBufferInTheOrderOfTheIds) {
  const std::uint64_t rows = 40000, rb = 64 * 4;
  auto want = AddTable("t", rows, 64, DType::kF32, false, 1000);
  auto c = Connect();
  auto tables = c->ListTables();
  ASSERT_TRUE(tables.ok() && tables->size() == 1);
  const std::uint64_t cid = (*tables)[0].content_id;
  std::vector<std::uint64_t> ids;
  for (std::uint64_t i = 0; i < 15000; ++i) ids.push_back((rows - 1 - i * 7) % rows);
  ids.push_back(ids[3]);
  std::vector<std::byte> out(ids.size() * rb);
  std::uint64_t wire = 0;
  ASSERT_TRUE(c->LookupRowsInto("t", ids, cid, rb, out, &wire).ok());
  EXPECT_EQ(wire, out.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(std::memcmp(out.data() + i * rb, want.data() + ids[i] * rb, rb), 0) << i;
  }
  ids.back() = rows;
  Status st = c->LookupRowsInto("t", ids, cid, rb, out, &wire);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange) << st.ToString();
  EXPECT_NE(st.message().find(std::to_string(rows)), std::string::npos) << st.ToString();
  ids.back() = 0;
  EXPECT_EQ(c->LookupRowsInto("t", ids, cid + 1, rb, out, &wire).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->LookupRowsInto("t", ids, cid, rb, std::span<std::byte>(out).first(rb), &wire)
                .code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, RowHashesAgainstACopyAskOnlyForTheGroupsThatDiffer) {
  // More than one reply of row hashes (262,144 rows): the per-row form takes two pages.
  const std::uint64_t rows = 300001, rb = 4;
  auto want = AddTable("t", rows, 1, DType::kF32, false, 1000);
  auto c = Connect();
  auto tables = c->ListTables();
  ASSERT_TRUE(tables.ok() && tables->size() == 1);
  const std::uint64_t cid = (*tables)[0].content_id;
  std::vector<std::uint64_t> server(rows);
  for (std::uint64_t r = 0; r < rows; ++r) {
    server[r] = store::Checksum64(std::span<const std::byte>(want).subspan(r * rb, rb));
  }
  std::vector<std::uint64_t> hashes, blocks, groups;
  std::uint64_t bytes = 0;
  bool verified = false;
  ASSERT_TRUE(c->RowHashes("t", cid, rows, &hashes, &blocks, &bytes, &verified).ok());
  EXPECT_EQ(hashes, server);
  EXPECT_TRUE(verified);
  EXPECT_GE(bytes, rows * 8);
  const std::uint64_t num_blocks = blocks.size();

  // A copy that differs in rows 0, 17, 262143 and the last: groups 0, 1, 16383 and 18750.
  std::vector<std::uint64_t> copy = server;
  for (std::uint64_t r : {std::uint64_t{0}, std::uint64_t{17}, std::uint64_t{262143}, rows - 1}) {
    copy[r] ^= 1;
  }
  std::uint32_t answered = 0;
  bytes = 0;
  verified = false;
  // The copy's hashes are asked for segment by segment, in row order (an eighth of the table, at
  // least 65,536 rows: 4,096 groups), and each segment's differing groups are handed over as
  // their row hashes arrive.
  std::vector<std::uint64_t> asked_upto;
  std::mutex mu;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> arrived;  // (group, its first row's hash)
  ASSERT_TRUE(c->RowHashesAgainst(
                   "t", cid, rows, 16,
                   [&](std::uint64_t upto) -> std::span<const std::uint64_t> {
                     asked_upto.push_back(upto);
                     return copy;
                   },
                   [&](std::span<const std::uint64_t> gs, std::span<const std::uint64_t> hs,
                       std::span<const std::uint64_t> mine) {
                     EXPECT_EQ(mine.data(), copy.data());
                     std::lock_guard lock(mu);
                     std::size_t at = 0;
                     for (std::uint64_t g : gs) {
                       arrived.emplace_back(g, hs[at]);
                       at += std::min<std::uint64_t>(16, rows - g * 16);
                     }
                     EXPECT_EQ(at, hs.size());
                     return Status::OK();
                   },
                   &answered, &groups, &hashes, &blocks, &bytes, &verified)
                  .ok());
  EXPECT_EQ(asked_upto, (std::vector<std::uint64_t>{65536, 131072, 196608, 262144, rows}));
  std::sort(arrived.begin(), arrived.end());
  EXPECT_EQ(arrived, (std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                         {0, server[0]}, {1, server[16]}, {16383, server[262128]},
                         {18750, server[300000]}}));
  EXPECT_EQ(answered, 16u);
  EXPECT_EQ(groups, (std::vector<std::uint64_t>{0, 1, 16383, 18750}));
  std::vector<std::uint64_t> expect;
  for (std::uint64_t g : groups) {
    for (std::uint64_t r = g * 16; r < std::min(rows, g * 16 + 16); ++r) expect.push_back(server[r]);
  }
  EXPECT_EQ(hashes, expect);
  EXPECT_EQ(blocks.size(), num_blocks);
  EXPECT_TRUE(verified);
  // One hash per group of 16 rows and 49 row hashes, not 8 bytes a row.
  EXPECT_GE(bytes, 8 * (rows / 16 + 1) + 8 * 49);
  EXPECT_LT(bytes, 8 * (rows / 16 + 1) + 8 * 49 + 4096);

  // What `arrived` says fails the call.
  EXPECT_EQ(c->RowHashesAgainst(
                 "t", cid, rows, 16, [&](std::uint64_t) -> std::span<const std::uint64_t> {
                   return copy;
                 },
                 [&](std::span<const std::uint64_t> gs, std::span<const std::uint64_t>,
                     std::span<const std::uint64_t>) {
                   return gs.front() == 16383 ? Status::Unavailable("lookup failed")
                                              : Status::OK();
                 },
                 &answered, &groups, &hashes, &blocks, &bytes, &verified)
                .code(),
            StatusCode::kUnavailable);

  auto whole = [&](std::uint64_t) -> std::span<const std::uint64_t> { return copy; };
  // The same copy: nothing differs.
  copy = server;
  ASSERT_TRUE(c->RowHashesAgainst("t", cid, rows, 16, whole, nullptr, &answered, &groups, &hashes,
                                  &blocks, &bytes, &verified)
                  .ok());
  EXPECT_EQ(answered, 16u);
  EXPECT_TRUE(groups.empty() && hashes.empty());
  // A copy of another shape, or a group size out of range, is an error.
  copy.pop_back();
  EXPECT_EQ(c->RowHashesAgainst("t", cid, rows, 16, whole, nullptr, &answered, &groups, &hashes,
                                &blocks, &bytes, &verified)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(c->RowHashesAgainst("t", cid, rows, 1, whole, nullptr, &answered, &groups, &hashes,
                                &blocks, &bytes, &verified)
                .code(),
            StatusCode::kInvalidArgument);
}

// Serves `service` alone on a free loopback port; *target is where to reach it.
bool StartFake(grpc::Service* service, std::unique_ptr<grpc::Server>* server, std::string* target) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  *server = builder.BuildAndStart();
  *target = "127.0.0.1:" + std::to_string(port);
  return *server != nullptr && port > 0;
}

// A server from before group_rows: RowHashes ignores the field and sends each row's hash (with
// made-up block checksums: block b's is b).
class RowHashesWithoutGroups final : public v1::EmbStore::Service {
 public:
  RowHashesWithoutGroups(std::vector<std::uint64_t> hashes, std::uint64_t block_rows)
      : hashes_(std::move(hashes)), block_rows_(block_rows) {}

  grpc::Status RowHashes(grpc::ServerContext*, const v1::RowHashesRequest* req,
                         v1::RowHashesResponse* resp) override {
    const std::uint64_t end = req->has_end_row() ? req->end_row() : hashes_.size();
    const std::uint64_t n = std::min<std::uint64_t>(end - req->begin_row(), 262144);
    resp->set_first_row(req->begin_row());
    resp->set_row_hashes(
        std::string(reinterpret_cast<const char*>(hashes_.data() + req->begin_row()), n * 8));
    resp->set_first_block(req->begin_row() / block_rows_);
    for (std::uint64_t b = req->begin_row() / block_rows_;
         b <= (req->begin_row() + n - 1) / block_rows_; ++b) {
      resp->add_block_checksums(b);
    }
    resp->set_verified(true);
    return grpc::Status::OK;
  }

 private:
  std::vector<std::uint64_t> hashes_;
  std::uint64_t block_rows_;
};

TEST(RowHashesAgainst, AServerWithoutGroupHashesIsAskedForEveryRowsHash) {
  const std::uint64_t rows = 300001;
  std::vector<std::uint64_t> hashes(rows);
  for (std::uint64_t r = 0; r < rows; ++r) hashes[r] = r * 0x9E3779B97F4A7C15ull + 1;
  RowHashesWithoutGroups service(hashes, 64);
  std::unique_ptr<grpc::Server> server;
  ConnectOptions o;
  ASSERT_TRUE(StartFake(&service, &server, &o.target));
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<std::uint64_t> got, blocks, groups{7};
  std::uint32_t answered = 99;
  std::uint64_t bytes = 0;
  bool verified = false;
  int asked_for_local = 0;
  const std::vector<std::uint64_t> copy(rows, 0);
  Status st = (*c)->RowHashesAgainst(
      "t", 1, rows, 16,
      [&](std::uint64_t) -> std::span<const std::uint64_t> {
        ++asked_for_local;
        return copy;
      },
      [&](std::span<const std::uint64_t>, std::span<const std::uint64_t>,
          std::span<const std::uint64_t>) {
        ADD_FAILURE() << "no groups to hand over from a server without group hashes";
        return Status::OK();
      },
      &answered, &groups, &got, &blocks, &bytes, &verified);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(answered, 0u);
  EXPECT_TRUE(groups.empty());
  EXPECT_EQ(got, hashes);
  EXPECT_EQ(blocks.size(), (rows + 63) / 64);
  EXPECT_EQ(blocks.back(), blocks.size() - 1);
  EXPECT_TRUE(verified);
  EXPECT_EQ(asked_for_local, 0);
  // Every row's hash, and the first reply to the group request, which brought row hashes.
  EXPECT_GE(bytes, 8 * rows + 8 * 262144);
  server->Shutdown();
}

// A server whose Lookup answers in protobuf's own encoding (`data` before the checksums, as any
// other implementation of the protocol may send it), optionally damaged. Row r's byte j is
// (r * 131 + j * 7) mod 256; version 77, float32 rows of `dim` values.
class LookupByProtobuf final : public v1::EmbStore::Service {
 public:
  enum class Damage { kNone, kFlippedByte, kRowsSwapped, kOtherVersion, kChecksumsMissing };
  explicit LookupByProtobuf(std::uint64_t dim) : dim_(dim) {}

  static std::string Row(std::uint64_t r, std::size_t row_bytes) {
    std::string row(row_bytes, '\0');
    for (std::size_t j = 0; j < row_bytes; ++j) row[j] = static_cast<char>((r * 131 + j * 7) & 0xff);
    return row;
  }

  grpc::Status Lookup(grpc::ServerContext*, const v1::LookupRequest* req,
                      v1::LookupResponse* resp) override {
    const std::size_t rb = dim_ * 4;
    resp->set_content_id(damage == Damage::kOtherVersion ? 78 : 77);
    resp->set_dim(dim_);
    resp->set_dtype(v1::DTYPE_F32);
    std::string data;
    for (const std::uint64_t id : req->rows().ids()) {
      const std::string row = Row(id, rb);
      resp->add_rows(id);
      resp->add_row_checksums(store::Checksum64(std::as_bytes(std::span(row))));
      data += row;
    }
    if (damage == Damage::kFlippedByte) data[data.size() / 2] ^= 0x20;
    if (damage == Damage::kRowsSwapped && resp->rows_size() > 1) {
      std::swap(*resp->mutable_rows()->Mutable(0), *resp->mutable_rows()->Mutable(1));
    }
    if (damage == Damage::kChecksumsMissing) resp->mutable_row_checksums()->RemoveLast();
    resp->set_data(std::move(data));
    return grpc::Status::OK;
  }

  std::atomic<Damage> damage{Damage::kNone};

 private:
  std::uint64_t dim_;
};

TEST(LookupReplies, RowsComeWhereTheyArrivedAndEveryDamageIsRefused) {
  // Rows of 516 bytes, 3,000 of them: two replies of about 1 MiB, which gRPC hands over in many
  // receive slices, so rows are split between slices.
  const std::uint64_t dim = 129;
  const std::size_t rb = dim * 4;
  LookupByProtobuf service(dim);
  std::unique_ptr<grpc::Server> server;
  ConnectOptions o;
  ASSERT_TRUE(StartFake(&service, &server, &o.target));
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> ids(3000);
  for (auto& id : ids) id = rng() % 1000000;

  HeldRows held;
  std::uint64_t wire = 0;
  Status st = (*c)->LookupRowsHeld("t", ids, 77, rb, &held, &wire);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(wire, ids.size() * rb);
  EXPECT_EQ(held.pieces.size(), 2u);
  ASSERT_EQ(held.rows.size(), ids.size());
  for (std::size_t k = 0; k < ids.size(); ++k) {
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(held.rows[k]), rb),
              LookupByProtobuf::Row(ids[k], rb))
        << "row " << k;
  }
  std::vector<std::byte> out(ids.size() * rb);
  ASSERT_TRUE((*c)->LookupRowsInto("t", ids, 77, rb, out, &wire).ok());
  for (std::size_t k = 0; k < ids.size(); ++k) {
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(out.data() + k * rb), rb),
              LookupByProtobuf::Row(ids[k], rb));
  }
  auto found = (*c)->LookupRows("t", ids, 77);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->rows, ids);
  EXPECT_TRUE(std::equal(found->data.begin(), found->data.end(), out.begin(), out.end()));

  using Damage = LookupByProtobuf::Damage;
  for (auto [damage, says] : {std::pair{Damage::kFlippedByte, "fails its checksum"},
                              std::pair{Damage::kRowsSwapped, "was asked for"},
                              std::pair{Damage::kOtherVersion, "of version 78"},
                              std::pair{Damage::kChecksumsMissing, "2031 checksums"}}) {
    service.damage = damage;
    st = (*c)->LookupRowsHeld("t", ids, 77, rb, &held, &wire);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << says << ": " << st.ToString();
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(o.target), std::string::npos) << st.message();
  }
  service.damage = Damage::kFlippedByte;
  EXPECT_EQ((*c)->LookupRows("t", ids, 77).status().code(), StatusCode::kCorruption);
  server->Shutdown();
}

}  // namespace
}  // namespace embstore::client
