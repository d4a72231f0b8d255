// In-process server tests: a real gRPC server on 127.0.0.1:0 (or a unix socket), real channels,
// the generated stubs a client would use.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "embstore/server/log.h"
#include "embstore/server/server.h"
#include "embstore/store/checksum.h"
#include "embstore/v1/embstore.grpc.pb.h"
#include "grpc_test_util.h"
#include "server_internal.h"
#include "test_util.h"

namespace embstore::server {
namespace {

using testing::CheckRowStream;
using testing::ExpectedRowBytes;
using testing::LargeTable;
using testing::TableSpec;
using testing::TempDir;
using testing::WriteTestTable;

struct Pulled {
  grpc::Status status;
  std::vector<v1::RowChunk> chunks;
};

Pulled PullAll(v1::EmbStore::Stub& stub, const v1::StreamRowsRequest& req,
               grpc::ClientContext* ctx) {
  Pulled out;
  auto reader = stub.StreamRows(ctx, req);
  v1::RowChunk c;
  while (reader->Read(&c)) out.chunks.push_back(c);
  out.status = reader->Finish();
  return out;
}

v1::StreamRowsRequest RowsReq(const std::string& table, std::uint64_t chunk_bytes = 0) {
  v1::StreamRowsRequest r;
  r.set_table(table);
  r.set_chunk_bytes(chunk_bytes);
  return r;
}

// Waits (bounded) until `pred` holds; tests never assert how long that takes.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 2000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteTestTable(dir_.File("words.emb"), words_).ok());
    ASSERT_TRUE(WriteTestTable(dir_.File("plain.emb"), plain_).ok());
    config_.store_dir = dir_.path();
    config_.listen = {"127.0.0.1:0"};
    config_.metrics_listen = "127.0.0.1:0";
    config_.poll_interval = std::chrono::milliseconds(20);
    config_.log_level = "error";
  }

  void Start() {
    auto s = Server::Start(config_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(s).value();
    channel_ = Channel();
    stub_ = v1::EmbStore::NewStub(channel_);
  }

  std::shared_ptr<grpc::Channel> Channel() {
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection of its own
    return grpc::CreateCustomChannel(server_->addresses().front(),
                                     grpc::InsecureChannelCredentials(), args);
  }

  std::string Metrics() { return server_->RenderMetrics(); }

  TempDir dir_;
  TableSpec words_{.rows = 3000,
                   .dim = 32,
                   .dtype = store::DType::kF32,
                   .with_keys = true,
                   .block_rows = 100,
                   .salt = 0};
  TableSpec plain_{.rows = 10,
                   .dim = 4,
                   .dtype = store::DType::kF16,
                   .with_keys = false,
                   .block_rows = 4,
                   .salt = 0};
  ServerConfig config_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::EmbStore::Stub> stub_;
};

TEST_F(ServerTest, EveryRpcWorksOverTheWire) {
  Start();
  {
    grpc::ClientContext ctx;
    v1::ListTablesResponse list;
    ASSERT_TRUE(stub_->ListTables(&ctx, {}, &list).ok());
    ASSERT_EQ(list.tables_size(), 2);
    EXPECT_EQ(list.tables(1).name(), "words");
    EXPECT_EQ(list.tables(1).rows(), 3000u);
  }
  {
    grpc::ClientContext ctx;
    v1::DescribeTableRequest req;
    req.set_table("words");
    v1::TableInfo info;
    ASSERT_TRUE(stub_->DescribeTable(&ctx, req, &info).ok());
    EXPECT_EQ(info.key_count(), 3000u);
    EXPECT_EQ(info.metadata().at("purpose"), "server test");
    EXPECT_TRUE(std::filesystem::exists(info.file().path()));
  }
  {
    grpc::ClientContext ctx;
    Pulled p = PullAll(*stub_, RowsReq("words"), &ctx);
    ASSERT_TRUE(p.status.ok()) << p.status.error_message();
    EXPECT_EQ(CheckRowStream(p.chunks, 0, 3000, ExpectedRowBytes(words_, 0, 3000)), "");
    // Counted when the call ends on the server, which may be just after the client saw it end.
    EXPECT_TRUE(Eventually([&] {
      return Metrics().find("embstore_bytes_served_total{table=\"words\"} " +
                            std::to_string(3000 * 32 * 4) + "\n") != std::string::npos;
    })) << Metrics();
  }
  {
    grpc::ClientContext ctx;
    v1::LookupRequest req;
    req.set_table("words");
    req.mutable_keys()->add_keys("key-42");
    req.mutable_keys()->add_keys("nope");
    v1::LookupResponse resp;
    ASSERT_TRUE(stub_->Lookup(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.rows_size(), 1);
    EXPECT_EQ(resp.rows(0), 42u);
    ASSERT_EQ(resp.missing_size(), 1);
    EXPECT_EQ(resp.missing(0), 1u);
    EXPECT_EQ(resp.data(), ExpectedRowBytes(words_, 42, 43));
  }
  {
    grpc::ClientContext ctx;
    v1::StreamKeysRequest req;
    req.set_table("words");
    auto reader = stub_->StreamKeys(&ctx, req);
    v1::KeyChunk c;
    std::uint64_t n = 0;
    while (reader->Read(&c)) {
      std::size_t at = 0;
      for (auto len : c.key_lengths()) {
        EXPECT_EQ(c.key_data().substr(at, len), testing::TestKey(n));
        at += len;
        ++n;
      }
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(n, 3000u);
  }
  EXPECT_TRUE(Eventually([&] {
    return Metrics().find("embstore_requests_total{method=\"StreamKeys\",code=\"OK\"} 1") !=
           std::string::npos;
  })) << Metrics();
}

TEST_F(ServerTest, ErrorsMapToPreciseStatusCodes) {
  Start();
  auto stream_code = [&](const v1::StreamRowsRequest& r) {
    grpc::ClientContext ctx;
    Pulled p = PullAll(*stub_, r, &ctx);
    EXPECT_TRUE(p.chunks.empty());
    return std::make_pair(p.status.error_code(), p.status.error_message());
  };
  auto [c1, m1] = stream_code(RowsReq("missing"));
  EXPECT_EQ(c1, grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(m1.find("'missing'"), std::string::npos);
  EXPECT_EQ(stream_code(RowsReq("../plain")).first, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(stream_code(RowsReq("words", 1ull << 30)).first, grpc::StatusCode::INVALID_ARGUMENT);
  v1::StreamRowsRequest past = RowsReq("words");
  past.set_begin_row(3001);
  EXPECT_EQ(stream_code(past).first, grpc::StatusCode::OUT_OF_RANGE);
  v1::StreamRowsRequest stale = RowsReq("words");
  stale.set_expected_content_id(1);
  EXPECT_EQ(stream_code(stale).first, grpc::StatusCode::FAILED_PRECONDITION);

  {
    grpc::ClientContext ctx;
    v1::LookupRequest req;
    req.set_table("plain");
    req.mutable_keys()->add_keys("k");
    v1::LookupResponse resp;
    EXPECT_EQ(stub_->Lookup(&ctx, req, &resp).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
  {
    grpc::ClientContext ctx;
    v1::LookupRequest req;
    req.set_table("words");
    for (int i = 0; i < 20000; ++i) req.mutable_rows()->add_ids(1);
    v1::LookupResponse resp;
    grpc::Status st = stub_->Lookup(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(st.error_message().find("batch limit of 16384"), std::string::npos);
  }
  {
    grpc::ClientContext ctx;
    v1::DescribeTableRequest req;
    req.set_table("");
    v1::TableInfo info;
    EXPECT_EQ(stub_->DescribeTable(&ctx, req, &info).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Bytes that are no protobuf message at all.
  for (const char* method :
       {"/embstore.v1.EmbStore/DescribeTable", "/embstore.v1.EmbStore/Lookup"}) {
    auto [st, resp] = testing::GenericUnary(channel_, method, "\xff\xff\xff\xff");
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_NE(st.error_message().find("malformed"), std::string::npos);
  }
  auto [st, resps] = testing::GenericStreamOnce(channel_, "/embstore.v1.EmbStore/StreamRows",
                                                "\x0a\x05wo");  // length past the end
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("StreamRowsRequest"), std::string::npos);
  const std::string m = Metrics();
  EXPECT_NE(m.find("code=\"NOT_FOUND\""), std::string::npos);
  EXPECT_NE(m.find("code=\"INVALID_ARGUMENT\""), std::string::npos);
}

// Two servers on one port would each get some of the connections (gRPC's default
// SO_REUSEPORT): the second one must fail to start instead, naming the address.
TEST_F(ServerTest, ASecondServerOnABusyPortFailsToStart) {
  Start();
  ServerConfig second = config_;
  second.listen = {server_->addresses().front()};
  second.metrics_listen.clear();
  auto s = Server::Start(second);
  ASSERT_FALSE(s.ok()) << "a second server started on " << second.listen[0];
  EXPECT_NE(s.status().message().find(second.listen[0]), std::string::npos)
      << s.status().ToString();
  EXPECT_NE(s.status().message().find("in use"), std::string::npos) << s.status().ToString();
}

// Any other process listening there counts, not only another gRPC server, and a wildcard address
// is busy when one of its interfaces is.
TEST_F(ServerTest, APortAnotherProgramListensOnFailsToStart) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  for (const std::string& where : {"127.0.0.1:" + port, "0.0.0.0:" + port}) {
    ServerConfig c = config_;
    c.listen = {where};
    c.metrics_listen.clear();
    auto s = Server::Start(c);
    EXPECT_FALSE(s.ok()) << "a server started on " << where;
    if (!s.ok()) {
      EXPECT_NE(s.status().message().find(where + ": the address is in use"), std::string::npos)
          << s.status().ToString();
    }
  }
  close(fd);
}

TEST_F(ServerTest, LargestChunksFitTheDefaultClientReceiveLimit) {
  TableSpec big = LargeTable(20000, 64, 2);
  ASSERT_TRUE(WriteTestTable(dir_.File("big.emb"), big).ok());
  Start();
  grpc::ClientContext ctx;
  // The server's own limit, the largest a client may ask for.
  Pulled p = PullAll(*stub_, RowsReq("big", config_.service.max_chunk_bytes), &ctx);
  ASSERT_TRUE(p.status.ok()) << p.status.error_message();
  EXPECT_EQ(CheckRowStream(p.chunks, 0, 20000, ExpectedRowBytes(big, 0, 20000)), "");
  std::size_t largest = 0;
  for (const auto& c : p.chunks) largest = std::max(largest, c.ByteSizeLong());
  EXPECT_LE(largest, 4u << 20);
  EXPECT_GT(largest, 3u << 20);
}

TEST_F(ServerTest, HotReloadDuringAStreamKeepsTheOldVersionForThatStream) {
  Start();
  grpc::ClientContext ctx;
  auto reader = stub_->StreamRows(&ctx, RowsReq("words", 32 * 4 * 100));  // one block a chunk
  std::vector<v1::RowChunk> chunks(1);
  ASSERT_TRUE(reader->Read(&chunks[0]));
  const std::uint64_t old_generation = chunks[0].table().generation();

  TableSpec v2 = words_;
  v2.salt = 7;
  v2.rows = 500;
  ASSERT_TRUE(WriteTestTable(dir_.File("words.emb"), v2).ok());
  ASSERT_TRUE(Eventually([&] {
    auto e = CatalogOf(*server_).Get("words");
    return e.ok() && (*e)->generation() > old_generation;
  }));
  v1::RowChunk c;
  while (reader->Read(&c)) chunks.push_back(c);
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(CheckRowStream(chunks, 0, 3000, ExpectedRowBytes(words_, 0, 3000)), "");

  grpc::ClientContext ctx2;
  Pulled fresh = PullAll(*stub_, RowsReq("words"), &ctx2);
  ASSERT_TRUE(fresh.status.ok());
  EXPECT_EQ(CheckRowStream(fresh.chunks, 0, 500, ExpectedRowBytes(v2, 0, 500)), "");
  EXPECT_GT(fresh.chunks[0].table().generation(), old_generation);

  // Removal: the table disappears from the listing and streams of it are NOT_FOUND.
  ASSERT_EQ(::unlink(dir_.File("words.emb").c_str()), 0);
  ASSERT_TRUE(Eventually([&] { return !CatalogOf(*server_).Get("words").ok(); }));
  grpc::ClientContext ctx3;
  EXPECT_EQ(PullAll(*stub_, RowsReq("words"), &ctx3).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServerTest, ClientCutOffMidStreamCostsNothing) {
  TableSpec big = LargeTable(100000, 64);
  ASSERT_TRUE(WriteTestTable(dir_.File("big.emb"), big).ok());
  Start();
  for (int round = 0; round < 2; ++round) {
    auto channel = Channel();
    auto stub = v1::EmbStore::NewStub(channel);
    auto ctx = std::make_unique<grpc::ClientContext>();
    auto reader = stub->StreamRows(ctx.get(), RowsReq("big"));
    v1::RowChunk c;
    ASSERT_TRUE(reader->Read(&c));
    ASSERT_TRUE(Eventually(
        [&] { return Metrics().find("embstore_active_streams 1\n") != std::string::npos; }));
    if (round == 0) {
      ctx->TryCancel();  // the client cancels
      reader->Finish();
    } else {
      reader.reset();  // the client just goes away, connection and all
      ctx.reset();
      stub.reset();
      channel.reset();
    }
    ASSERT_TRUE(Eventually([&] {
      return Metrics().find("embstore_active_streams 0\n") != std::string::npos;
    })) << Metrics();
  }
  EXPECT_NE(Metrics().find("embstore_requests_total{method=\"StreamRows\",code=\"CANCELLED\"} 2"),
            std::string::npos)
      << Metrics();
  grpc::ClientContext ctx;
  v1::ListTablesResponse list;
  EXPECT_TRUE(stub_->ListTables(&ctx, {}, &list).ok());
}

TEST_F(ServerTest, FileTruncatedUnderTheMappingFailsTheStreamNotTheServer) {
  TableSpec big = LargeTable(16384, 512);  // 32 MiB, more than the transport buffers
  ASSERT_TRUE(WriteTestTable(dir_.File("big.emb"), big).ok());
  Start();
  grpc::ClientContext ctx;
  auto reader = stub_->StreamRows(&ctx, RowsReq("big", 64 << 10));
  std::vector<v1::RowChunk> chunks(1);
  ASSERT_TRUE(reader->Read(&chunks[0]));
  ASSERT_EQ(::truncate(dir_.File("big.emb").c_str(), 8192), 0);  // in place, under the mapping
  v1::RowChunk c;
  while (reader->Read(&c)) chunks.push_back(c);
  grpc::Status st = reader->Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.error_code() == grpc::StatusCode::DATA_LOSS ||
              st.error_code() == grpc::StatusCode::UNAVAILABLE ||
              st.error_code() == grpc::StatusCode::INTERNAL)
      << st.error_code() << " " << st.error_message();
  if (st.error_code() == grpc::StatusCode::DATA_LOSS) {
    EXPECT_NE(st.error_message().find("big.emb"), std::string::npos) << st.error_message();
  }
  // Every block that arrived entirely either is the table's data or fails its stored checksum:
  // nothing wrong passes verification. (Chunks are pieces of 1 MiB blocks here.)
  const std::string expected = ExpectedRowBytes(big, 0, big.rows);
  const std::uint64_t row_bytes = 512 * 4;
  const std::uint64_t block_rows = chunks[0].table().block_rows();
  std::string block;
  std::uint64_t block_begin = 0;
  for (const auto& ch : chunks) {
    if (ch.first_row() % block_rows == 0) {
      block.clear();
      block_begin = ch.first_row();
    }
    block += ch.payload();
    if (block.size() != std::min(block_rows, big.rows - block_begin) * row_bytes) continue;
    const bool intact = block == expected.substr(block_begin * row_bytes, block.size());
    auto bytes = std::as_bytes(std::span<const char>(block.data(), block.size()));
    const bool verifies = store::Checksum64(bytes) == ch.block_checksums(0);
    EXPECT_EQ(intact, verifies) << "block at row " << block_begin;
  }
  // The process is alive and serves the other tables.
  auto channel = Channel();
  auto stub = v1::EmbStore::NewStub(channel);
  grpc::ClientContext ctx2;
  Pulled p = PullAll(*stub, RowsReq("words"), &ctx2);
  ASSERT_TRUE(p.status.ok());
  EXPECT_EQ(CheckRowStream(p.chunks, 0, 3000, ExpectedRowBytes(words_, 0, 3000)), "");
}

TEST_F(ServerTest, StreamOfAFileShrunkUnderItEndsWithDataLoss) {
  TableSpec big = LargeTable(16384, 512);  // 32 MiB of rows, then the checksums
  ASSERT_TRUE(WriteTestTable(dir_.File("big.emb"), big).ok());
  Start();
  grpc::ClientContext ctx;
  auto reader = stub_->StreamRows(&ctx, RowsReq("big", 64 << 10));
  v1::RowChunk c;
  ASSERT_TRUE(reader->Read(&c));
  // Cut only the last page (checksums): the rows already queued stay readable, and the server
  // notices the shrink before its next chunk.
  const auto size = std::filesystem::file_size(dir_.File("big.emb"));
  ASSERT_EQ(::truncate(dir_.File("big.emb").c_str(), static_cast<off_t>(size - 4096)), 0);
  std::uint64_t rows = c.row_count();
  while (reader->Read(&c)) rows += c.row_count();
  grpc::Status st = reader->Finish();
  EXPECT_LT(rows, big.rows);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::DATA_LOSS) << st.error_message();
  EXPECT_NE(st.error_message().find("big.emb"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("shrank"), std::string::npos) << st.error_message();
}

TEST_F(ServerTest, HealthIsNotServingWhileDrainingAndNewCallsAreUnavailable) {
  Start();
  EXPECT_EQ(testing::HealthStatus(channel_, ""), 1);
  EXPECT_EQ(testing::HealthStatus(channel_, "embstore.v1.EmbStore"), 1);
  server_->BeginDrain();
  EXPECT_EQ(testing::HealthStatus(channel_, ""), 2);
  EXPECT_EQ(testing::HealthStatus(channel_, "embstore.v1.EmbStore"), 2);
  grpc::ClientContext ctx;
  v1::ListTablesResponse list;
  grpc::Status st = stub_->ListTables(&ctx, {}, &list);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("shutting down"), std::string::npos);
  server_->Shutdown(std::chrono::milliseconds(100));
}

TEST_F(ServerTest, ShutdownLetsStreamsRunUntilTheGraceThenCancelsThem) {
  TableSpec big = LargeTable(100000, 64);
  ASSERT_TRUE(WriteTestTable(dir_.File("big.emb"), big).ok());
  Start();
  grpc::ClientContext ctx;
  auto reader = stub_->StreamRows(&ctx, RowsReq("big"));
  v1::RowChunk c;
  ASSERT_TRUE(reader->Read(&c));  // then stop reading: the stream stalls on flow control
  std::thread stopper([&] { server_->Shutdown(std::chrono::milliseconds(300)); });
  stopper.join();  // returns once the grace is over and the stalled stream was cancelled
  while (reader->Read(&c)) {
  }
  grpc::Status st = reader->Finish();
  EXPECT_FALSE(st.ok());
  server_->Wait();  // returns: shutdown completed
}

TEST_F(ServerTest, ReflectionListsTheService) {
  Start();
  // ServerReflectionRequest{list_services: ""}: field 7, string.
  auto [st, resps] = testing::GenericStreamOnce(
      channel_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      std::string("\x3a\x00", 2));
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resps.size(), 1u);
  EXPECT_NE(resps[0].find("embstore.v1.EmbStore"), std::string::npos);
  EXPECT_NE(resps[0].find("grpc.health.v1.Health"), std::string::npos);
}

TEST_F(ServerTest, BearerTokenIsRequiredWhenConfigured) {
  config_.auth_tokens = {"first-token", "second-token"};
  Start();
  auto list = [&](const char* auth) {
    grpc::ClientContext ctx;
    if (auth) ctx.AddMetadata("authorization", auth);
    v1::ListTablesResponse resp;
    return stub_->ListTables(&ctx, {}, &resp);
  };
  EXPECT_EQ(list(nullptr).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(list(nullptr).error_message().find("missing bearer token"), std::string::npos);
  EXPECT_EQ(list("Bearer wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(list("Basic Zmlyc3QtdG9rZW4=").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(list("Bearer second-token").ok());
  EXPECT_TRUE(list("bearer first-token").ok());
  grpc::ClientContext ctx;
  EXPECT_EQ(PullAll(*stub_, RowsReq("words"), &ctx).status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(testing::HealthStatus(channel_, ""), 1);  // probes need no token
}

TEST_F(ServerTest, RepeatedFailuresOfOneClientLogOneLineAndACount) {
  config_.auth_tokens = {"tok"};
  config_.log_level = "warn";
  config_.log_repeat_interval = std::chrono::hours(1);  // the whole test is one interval
  std::mutex mu;
  std::vector<nlohmann::json> lines;
  SetLogSink([&](std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(nlohmann::json::parse(line));
  });
  struct RestoreStderr {
    ~RestoreStderr() { SetLogSink(nullptr); }
  } restore;
  Start();
  constexpr int kCalls = 10000;
  for (int i = 0; i < kCalls; ++i) {
    grpc::ClientContext ctx;
    v1::ListTablesResponse resp;
    ASSERT_EQ(stub_->ListTables(&ctx, {}, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  server_->Shutdown(std::chrono::milliseconds(0));  // reports the counts not yet reported
  std::lock_guard<std::mutex> lock(mu);
  std::vector<nlohmann::json> rpc, summaries;
  for (const auto& l : lines) {
    if (l["msg"] == "rpc") rpc.push_back(l);
    if (l["msg"] == "similar lines suppressed") summaries.push_back(l);
  }
  ASSERT_EQ(rpc.size(), 1u) << rpc.size() << " rpc lines";
  EXPECT_EQ(rpc[0]["code"], "UNAUTHENTICATED");
  EXPECT_EQ(rpc[0]["method"], "ListTables");
  ASSERT_EQ(summaries.size(), 1u);
  EXPECT_EQ(summaries[0]["suppressed"], kCalls - 1);
  EXPECT_EQ(summaries[0]["level"], "warn");
  const std::string key = summaries[0]["key"];
  EXPECT_NE(key.find("UNAUTHENTICATED ListTables ipv4:127.0.0.1"), std::string::npos) << key;
}

TEST_F(ServerTest, ConcurrentStreamLimitIsResourceExhausted) {
  TableSpec big = LargeTable(100000, 64);
  ASSERT_TRUE(WriteTestTable(dir_.File("big.emb"), big).ok());
  config_.max_concurrent_streams = 1;
  Start();
  grpc::ClientContext ctx;
  auto reader = stub_->StreamRows(&ctx, RowsReq("big"));
  v1::RowChunk c;
  ASSERT_TRUE(reader->Read(&c));
  grpc::ClientContext ctx2;
  Pulled second = PullAll(*stub_, RowsReq("words"), &ctx2);
  EXPECT_EQ(second.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(second.status.error_message().find("limit of 1 concurrent"), std::string::npos);
  ctx.TryCancel();
  reader->Finish();
  ASSERT_TRUE(Eventually(
      [&] { return Metrics().find("embstore_active_streams 0\n") != std::string::npos; }));
  grpc::ClientContext ctx3;
  EXPECT_TRUE(PullAll(*stub_, RowsReq("words"), &ctx3).status.ok());
}

TEST_F(ServerTest, StreamsWhoseClientStoppedReadingAreCancelledAndFreeTheirSlots) {
  TableSpec big = LargeTable(100000, 64);
  ASSERT_TRUE(WriteTestTable(dir_.File("big.emb"), big).ok());
  config_.max_concurrent_streams = 2;
  config_.stream_idle_timeout = std::chrono::milliseconds(200);
  Start();
  // Two clients take every slot, read one chunk each and stop: the server's writes stall on
  // flow control (25 MB each, far more than the windows). The stalled clients' connection keeps
  // gRPC's initial 64 KiB windows (no bandwidth-delay probing), so they stay stalled however fast
  // or slow the machine is.
  grpc::ChannelArguments small_windows;
  small_windows.SetInt("grpc.use_local_subchannel_pool", 1);
  small_windows.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto stalled_stub = v1::EmbStore::NewStub(grpc::CreateCustomChannel(
      server_->addresses().front(), grpc::InsecureChannelCredentials(), small_windows));
  struct Stalled {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReader<v1::RowChunk>> reader;
  };
  Stalled stalled[2];
  for (auto& s : stalled) {
    s.reader = stalled_stub->StreamRows(&s.ctx, RowsReq("big"));
    v1::RowChunk c;
    ASSERT_TRUE(s.reader->Read(&c));
  }
  // Until the timeout, a third stream is refused; after it, the stalled ones are cancelled and a
  // new stream runs. (Both are waited for before anything reads them again: a stream read
  // before its own timeout fires would simply finish.)
  ASSERT_TRUE(Eventually([&] {
    return Metrics().find("embstore_requests_total{method=\"StreamRows\",code=\"CANCELLED\"} 2") !=
           std::string::npos;
  })) << Metrics();
  grpc::ClientContext third;
  EXPECT_TRUE(PullAll(*stub_, RowsReq("words"), &third).status.ok()) << Metrics();
  for (auto& s : stalled) {
    v1::RowChunk c;
    while (s.reader->Read(&c)) {
    }
    EXPECT_EQ(s.reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
}

TEST_F(ServerTest, RequestsOverTheReceiveLimitAreResourceExhausted) {
  config_.max_receive_message_bytes = 1024;
  Start();
  grpc::ClientContext ctx;
  v1::LookupRequest req;
  req.set_table("words");
  for (int i = 0; i < 200; ++i) req.mutable_keys()->add_keys(testing::TestKey(i));
  v1::LookupResponse resp;
  EXPECT_EQ(stub_->Lookup(&ctx, req, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext ctx2;
  v1::ListTablesResponse list;
  EXPECT_TRUE(stub_->ListTables(&ctx2, {}, &list).ok());  // small requests still pass
}

TEST_F(ServerTest, MetricsEndpointServesPrometheusText) {
  Start();
  grpc::ClientContext ctx;
  v1::ListTablesResponse list;
  ASSERT_TRUE(stub_->ListTables(&ctx, {}, &list).ok());
  ASSERT_GT(server_->metrics_port(), 0);
  httplib::Client http("127.0.0.1", server_->metrics_port());
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/plain"), std::string::npos);
  for (const char* want :
       {"# TYPE embstore_bytes_served_total counter", "embstore_active_streams 0",
        "embstore_requests_total{method=\"ListTables\",code=\"OK\"} 1",
        "embstore_request_duration_seconds_bucket{method=\"ListTables\",le=\"+Inf\"} 1",
        "embstore_request_duration_seconds_count{method=\"ListTables\"} 1", "embstore_tables 2",
        "embstore_catalog_events_total{result=\"loaded\"} 2"}) {
    EXPECT_NE(res->body.find(want), std::string::npos) << want << "\n" << res->body;
  }
}

TEST_F(ServerTest, MetricsConnectionsCloseAfterEachResponse) {
  // A kept-alive scrape connection would hold Shutdown() until httplib's keep-alive timeout.
  Start();
  httplib::Client http("127.0.0.1", server_->metrics_port());
  http.set_keep_alive(true);
  for (int i = 0; i < 2; ++i) {
    auto res = http.Get("/metrics");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->get_header_value("Connection"), "close");
  }
}

TEST_F(ServerTest, ServesOnAUnixSocketAsWell) {
  const std::string sock = dir_.File("srv.sock");
  config_.listen = {"127.0.0.1:0", "unix:" + sock};
  Start();
  ASSERT_EQ(server_->addresses().size(), 2u);
  EXPECT_EQ(server_->addresses()[1], "unix:" + sock);
  auto channel = grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials());
  auto stub = v1::EmbStore::NewStub(channel);
  grpc::ClientContext ctx;
  v1::ListTablesResponse list;
  ASSERT_TRUE(stub->ListTables(&ctx, {}, &list).ok());
  EXPECT_EQ(list.tables_size(), 2);  // the socket in the directory is no table
}

TEST_F(ServerTest, RefusesToStartOnBadConfiguration) {
  ServerConfig c = config_;
  c.listen.clear();
  EXPECT_EQ(Server::Start(c).status().code(), StatusCode::kInvalidArgument);
  c = config_;
  c.store_dir = dir_.File("no-such-dir");
  EXPECT_EQ(Server::Start(c).status().code(), StatusCode::kNotFound);
  c = config_;
  c.tls.cert_file = "x.pem";
  EXPECT_EQ(Server::Start(c).status().code(), StatusCode::kInvalidArgument);
  c = config_;
  c.listen = {"256.1.1.1:99999"};
  EXPECT_FALSE(Server::Start(c).ok());
  c = config_;
  c.max_transport_memory_bytes = c.max_receive_message_bytes - 1;  // no request would fit
  Status st = Server::Start(c).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("transport memory limit"), std::string::npos) << st.message();
}

// TLS with a throwaway CA, server and client certificates made by the openssl tool.
class TlsTest : public ServerTest {
 protected:
  static bool Run(const std::string& cmd) {
    return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
  }
  bool MakeCerts() {
    const std::string o = EMBSTORE_OPENSSL;
    const std::string d = certs_.path() + "/";
    const std::string key = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    testkit::WriteFileOrDie(d + "server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    return Run(o + " req -x509" + key + " -keyout " + d + "ca.key -out " + d +
               "ca.pem -days 2 -subj /CN=embstore-test-ca") &&
           Run(o + " req" + key + " -keyout " + d + "server.key -out " + d +
               "server.csr -subj /CN=localhost") &&
           Run(o + " x509 -req -in " + d + "server.csr -CA " + d + "ca.pem -CAkey " + d +
               "ca.key -CAcreateserial -days 2 -out " + d + "server.pem -extfile " + d +
               "server.ext") &&
           Run(o + " req" + key + " -keyout " + d + "client.key -out " + d +
               "client.csr -subj /CN=trainer") &&
           Run(o + " x509 -req -in " + d + "client.csr -CA " + d + "ca.pem -CAkey " + d +
               "ca.key -CAcreateserial -days 2 -out " + d + "client.pem");
  }
  std::shared_ptr<grpc::Channel> TlsChannel(bool with_client_cert) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = testkit::ReadFileOrEmpty(certs_.File("ca.pem"));
    if (with_client_cert) {
      o.pem_private_key = testkit::ReadFileOrEmpty(certs_.File("client.key"));
      o.pem_cert_chain = testkit::ReadFileOrEmpty(certs_.File("client.pem"));
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    return grpc::CreateCustomChannel(server_->addresses().front(), grpc::SslCredentials(o), args);
  }
  static grpc::Status List(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = v1::EmbStore::NewStub(ch);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListTablesResponse resp;
    return stub->ListTables(&ctx, {}, &resp);
  }
  TempDir certs_;
};

TEST_F(TlsTest, ServesOverTlsAndChecksClientCertificates) {
  ASSERT_TRUE(MakeCerts()) << "openssl failed";
  config_.tls = {certs_.File("server.pem"), certs_.File("server.key"), certs_.File("ca.pem")};
  Start();
  auto good = TlsChannel(true);
  EXPECT_TRUE(List(good).ok()) << List(good).error_message();
  {
    auto stub = v1::EmbStore::NewStub(good);
    grpc::ClientContext ctx;
    Pulled p = PullAll(*stub, RowsReq("words"), &ctx);
    ASSERT_TRUE(p.status.ok());
    EXPECT_EQ(CheckRowStream(p.chunks, 0, 3000, ExpectedRowBytes(words_, 0, 3000)), "");
  }
  EXPECT_EQ(List(TlsChannel(false)).error_code(), grpc::StatusCode::UNAVAILABLE);
  auto plain =
      grpc::CreateChannel(server_->addresses().front(), grpc::InsecureChannelCredentials());
  EXPECT_EQ(List(plain).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, ServerCertificateAloneServesAnyTlsClient) {
  ASSERT_TRUE(MakeCerts()) << "openssl failed";
  config_.tls = {certs_.File("server.pem"), certs_.File("server.key"), ""};
  config_.auth_tokens = {"tok"};
  Start();
  auto ch = TlsChannel(false);
  auto stub = v1::EmbStore::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer tok");
  v1::ListTablesResponse resp;
  EXPECT_TRUE(stub->ListTables(&ctx, {}, &resp).ok());
  EXPECT_EQ(List(ch).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace embstore::server
