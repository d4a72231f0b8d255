// Out-of-process tests: the real `embstore serve` binary, started on 127.0.0.1:0, found through
// its "listening" log line, and stopped with signals.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "embstore/testkit/child_process.h"
#include "embstore/testkit/sanitizers.h"
#include "embstore/v1/embstore.grpc.pb.h"
#include "test_util.h"
#include "transport/grpc_test_util.h"

namespace embstore::server {
namespace {

using testing::TableSpec;
using testing::TempDir;

using testkit::kSanitizedHeap;
using testkit::ProcStatusKb;

// The real `embstore` binary as a child process.
class Child : public testkit::ChildProcess {
 public:
  explicit Child(const std::vector<std::string>& args) : testkit::ChildProcess(EMBSTORE_BIN, args) {}
  // Waits for the "listening" line and connects to its first address; null when the child never
  // listens.
  std::shared_ptr<grpc::Channel> Connect() {
    nlohmann::json listening = AwaitLog("listening");
    if (!listening.is_object()) return nullptr;
    return grpc::CreateChannel(listening["addresses"][0].get<std::string>(),
                               grpc::InsecureChannelCredentials());
  }
};

class ServeProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteTestTable(dir_.File("words.emb"), words_).ok());
  }
  TempDir dir_;
  // 51 MB: more than the connection's flow-control windows, so a stream that read one chunk is
  // still running on the server.
  TableSpec words_{.rows = 200000,
                   .dim = 64,
                   .dtype = store::DType::kF32,
                   .with_keys = true,
                   .block_rows = 0,
                   .salt = 0};
};

TEST_F(ServeProcessTest, ServesAndStopsGracefullyOnSigterm) {
  Child child({"serve", "--store", dir_.path(), "--listen", "127.0.0.1:0", "--metrics-listen",
               "127.0.0.1:0", "--shutdown-grace-ms", "5000"});
  nlohmann::json listening = child.AwaitLog("listening");
  ASSERT_TRUE(listening.is_object()) << child.Stderr();
  const std::string simd = listening.value("simd", "");
  EXPECT_TRUE(simd == "scalar" || simd == "avx2" || simd == "avx512" ||
              simd == "neon") << listening.dump();
  const std::string addr = listening["addresses"][0];
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto stub = v1::EmbStore::NewStub(channel);
  EXPECT_EQ(testing::HealthStatus(channel, ""), 1);

  // A stream in flight when SIGTERM arrives runs to its end within the grace period.
  grpc::ClientContext ctx;
  v1::StreamRowsRequest req;
  req.set_table("words");
  auto reader = stub->StreamRows(&ctx, req);
  std::vector<v1::RowChunk> chunks(1);
  ASSERT_TRUE(reader->Read(&chunks[0]));
  child.Signal(SIGTERM);
  nlohmann::json draining = child.AwaitLog("draining");
  ASSERT_TRUE(draining.is_object()) << child.Stderr();
  EXPECT_EQ(draining["active_streams"], 1);  // the stream was still running
  v1::RowChunk c;
  while (reader->Read(&c)) chunks.push_back(c);
  grpc::Status finished = reader->Finish();
  ASSERT_TRUE(finished.ok()) << finished.error_code() << " " << finished.error_message() << "\n"
                             << child.Stderr();
  EXPECT_EQ(testing::CheckRowStream(chunks, 0, words_.rows,
                                    testing::ExpectedRowBytes(words_, 0, words_.rows)),
            "");
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
  EXPECT_TRUE(child.AwaitLog("stopped").is_object());
  nlohmann::json rpc = child.AwaitLog("rpc");
  ASSERT_TRUE(rpc.is_object());
  EXPECT_EQ(rpc["method"], "StreamRows");
  EXPECT_EQ(rpc["code"], "OK");
  EXPECT_TRUE(rpc.contains("ts"));
  EXPECT_TRUE(rpc.contains("level"));
}

TEST_F(ServeProcessTest, ShutdownWaitsNeitherForThePollIntervalNorAMetricsConnection) {
  // Ten minutes between directory scans, and a scraper that keeps its connection open: the
  // shutdown must wait for neither.
  Child child({"serve", "--store", dir_.path(), "--listen", "127.0.0.1:0", "--metrics-listen",
               "127.0.0.1:0", "--poll-interval-ms", "600000", "--shutdown-grace-ms", "0"});
  nlohmann::json listening = child.AwaitLog("listening");
  ASSERT_TRUE(listening.is_object()) << child.Stderr();
  httplib::Client http("127.0.0.1", listening["metrics_port"].get<int>());
  http.set_keep_alive(true);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  child.Signal(SIGTERM);
  EXPECT_TRUE(child.ExitsWithin(std::chrono::seconds(10))) << child.Stderr();
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
  EXPECT_TRUE(child.AwaitLog("stopped").is_object()) << child.Stderr();
}

TEST_F(ServeProcessTest, AStreamWhoseClientStoppedReadingTimesOutAndSaysWhich) {
  Child child({"serve", "--store", dir_.path(), "--listen", "127.0.0.1:0", "--max-streams", "1",
               "--stream-idle-timeout-ms", "300"});
  auto channel = child.Connect();
  ASSERT_TRUE(channel) << child.Stderr();
  auto stub = v1::EmbStore::NewStub(channel);
  grpc::ClientContext ctx;
  v1::StreamRowsRequest req;
  req.set_table("words");
  auto reader = stub->StreamRows(&ctx, req);
  v1::RowChunk c;
  ASSERT_TRUE(reader->Read(&c));  // then read no more: 51 MB do not fit the windows
  nlohmann::json timeout = child.AwaitLog("stream idle timeout");
  ASSERT_TRUE(timeout.is_object()) << child.Stderr();
  EXPECT_EQ(timeout["level"], "warn");
  EXPECT_EQ(timeout["method"], "StreamRows");
  EXPECT_EQ(timeout["table"], "words");
  EXPECT_EQ(timeout["timeout_ms"], 300);
  EXPECT_NE(timeout["peer"].get<std::string>().find("127.0.0.1"), std::string::npos);
  // The slot is free again once the cancelled call has ended, just after that line.
  v1::StreamRowsRequest few;
  few.set_table("words");
  few.set_end_row(10);
  grpc::Status second;
  std::uint64_t rows = 0;
  for (int i = 0; i < 2000; ++i) {
    grpc::ClientContext ctx2;
    auto r = stub->StreamRows(&ctx2, few);
    rows = 0;
    while (r->Read(&c)) rows += c.row_count();
    second = r->Finish();
    if (second.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(second.ok()) << second.error_message();
  EXPECT_EQ(rows, 10u);
  while (reader->Read(&c)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  child.Signal(SIGTERM);
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
}

TEST_F(ServeProcessTest, FloodsOfOversizedRequestsAreRefusedAndTheirMemoryGivenBack) {
  // gRPC reads a request whole before it checks the 4 MiB limit. The transport quota bounds
  // what the reading costs; what was freed goes back to the kernel.
  Child child({"serve", "--store", dir_.path(), "--listen", "127.0.0.1:0",
               "--max-transport-memory-bytes", std::to_string(32 << 20)});
  nlohmann::json listening = child.AwaitLog("listening");
  ASSERT_TRUE(listening.is_object()) << child.Stderr();
  const std::string addr = listening["addresses"][0];
  {
    auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
    EXPECT_EQ(testing::HealthStatus(channel, ""), 1);
  }
  const std::uint64_t rss_before_kb = ProcStatusKb(child.pid(), "VmRSS");
  const std::uint64_t anon_before_kb = ProcStatusKb(child.pid(), "RssAnon");
  ASSERT_GT(rss_before_kb, 0u);

  v1::LookupRequest req;
  req.set_table("words");
  req.mutable_keys()->add_keys(std::string(100'000'000, 'k'));
  const grpc::ByteBuffer huge = testing::ToBuffer(req.SerializeAsString());
  req.Clear();
  // 20 requests of 100 MB from 4 clients at once, each on its own connection.
  std::vector<std::thread> clients;
  std::mutex mu;
  std::map<grpc::StatusCode, int> codes;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      grpc::ChannelArguments args;
      args.SetInt("grpc.use_local_subchannel_pool", 1);
      auto channel = grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
      for (int i = 0; i < 5; ++i) {
        auto [st, resp] = testing::GenericUnary(channel, "/embstore.v1.EmbStore/Lookup", huge);
        std::lock_guard<std::mutex> lock(mu);
        ++codes[st.error_code()];
      }
    });
  }
  for (auto& c : clients) c.join();
  // Refused: over the receive limit, or cut off by the quota (the connection may go with it).
  EXPECT_EQ(codes[grpc::StatusCode::RESOURCE_EXHAUSTED] + codes[grpc::StatusCode::UNAVAILABLE], 20)
      << child.Stderr();
  {
    auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
    EXPECT_EQ(testing::HealthStatus(channel, ""), 1);  // and the server serves on
  }
  if (kSanitizedHeap) GTEST_SKIP() << "the sanitizer's allocator keeps freed memory";
  // Without the quota, the four clients' requests were held at once: 270 MB more at the peak.
  const std::uint64_t peak_kb = ProcStatusKb(child.pid(), "VmHWM");
  EXPECT_LT(peak_kb, rss_before_kb + 160 * 1024) << "peak " << peak_kb << " kB";
  // Without trimming, glibc kept 90-220 MB of it resident.
  std::uint64_t anon_kb = 0;
  for (int i = 0; i < 2000; ++i) {
    anon_kb = ProcStatusKb(child.pid(), "RssAnon");
    if (anon_kb < anon_before_kb + 48 * 1024) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(anon_kb, anon_before_kb + 48 * 1024)
      << "anonymous RSS " << anon_before_kb << " kB before the flood, " << anon_kb << " after";
  child.Signal(SIGTERM);
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
}

TEST_F(ServeProcessTest, ReadsAConfigFileAndFlagsOverrideIt) {
  testkit::WriteFileOrDie(dir_.File("serve.json"), "{\n  // comments are allowed\n  \"store\": \"" +
                                                       dir_.path() +
                                                       "\",\n  \"listen\": [\"127.0.0.1:1\"],\n"
                                                       "  \"limits\": {\"max_lookup_batch\": 2},\n"
                                                       "  \"log_level\": \"info\"\n}\n");
  Child child({"serve", "--config", dir_.File("serve.json"), "--listen", "127.0.0.1:0"});
  auto channel = child.Connect();
  ASSERT_TRUE(channel) << child.Stderr();
  auto stub = v1::EmbStore::NewStub(channel);
  grpc::ClientContext ctx;
  v1::LookupRequest req;
  req.set_table("words");
  for (int i = 0; i < 3; ++i) req.mutable_rows()->add_ids(i);
  v1::LookupResponse resp;
  EXPECT_EQ(stub->Lookup(&ctx, req, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  child.Signal(SIGINT);
  EXPECT_EQ(child.Wait(), 0) << child.Stderr();
}

TEST_F(ServeProcessTest, UsageErrorsExitTwoAndStartFailuresExitOne) {
  {
    Child child({"serve", "--listen", "127.0.0.1:0"});
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_NE(child.Stderr().find("--store"), std::string::npos) << child.Stderr();
  }
  {
    testkit::WriteFileOrDie(dir_.File("bad.json"), "{\"stroe\": \"x\"}");
    Child child({"serve", "--config", dir_.File("bad.json")});
    EXPECT_EQ(child.Wait(), 2);
    EXPECT_NE(child.Stderr().find("unknown key 'stroe'"), std::string::npos) << child.Stderr();
  }
  {
    Child child({"serve", "--store", dir_.File("missing"), "--listen", "127.0.0.1:0"});
    EXPECT_EQ(child.Wait(), 1);
    EXPECT_NE(child.Stderr().find("missing"), std::string::npos) << child.Stderr();
  }
  {
    Child child({"serve", "--help"});
    EXPECT_EQ(child.Wait(), 0);
  }
}

}  // namespace
}  // namespace embstore::server
