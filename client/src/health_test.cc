// CheckHealth and WaitUntilServing against the real server, in-process on loopback.
#include "embstore/client/health.h"
#include "embstore/testkit/temp_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <thread>

#include "embstore/server/server.h"

namespace embstore::client {
namespace {

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path();
    Start("127.0.0.1:0");
  }
  void TearDown() override { Stop(); }
  void Start(const std::string& listen) {
    server::ServerConfig cfg;
    cfg.store_dir = dir_;
    cfg.listen = {listen};
    cfg.log_level = "error";
    auto s = server::Server::Start(cfg);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    target_ = server_->addresses()[0];
  }
  void Stop() {
    if (server_) server_->Shutdown(std::chrono::milliseconds(0));
    server_.reset();
  }
  ConnectOptions Options() const {
    ConnectOptions o;
    o.target = target_;
    o.rpc_timeout = std::chrono::milliseconds(2000);
    return o;
  }

  testkit::TempDir temp_{"health-test"};
  std::string dir_;
  std::unique_ptr<server::Server> server_;
  std::string target_;
};

TEST_F(HealthTest, RunningServerIsServingForTheServerAndTheEmbStoreService) {
  auto all = CheckHealth(Options());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, ServingStatus::kServing);
  auto svc = CheckHealth(Options(), "embstore.v1.EmbStore");
  ASSERT_TRUE(svc.ok()) << svc.status().ToString();
  EXPECT_EQ(*svc, ServingStatus::kServing);
  EXPECT_EQ(ServingStatusName(*svc), "SERVING");
}

TEST_F(HealthTest, UnknownServiceIsNotFound) {
  auto st = CheckHealth(Options(), "no.such.Service");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kNotFound);
  EXPECT_NE(st.status().message().find("no.such.Service"), std::string::npos);
}

TEST_F(HealthTest, DrainingServerIsNotServing) {
  server_->BeginDrain();
  auto st = CheckHealth(Options());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(*st, ServingStatus::kNotServing);
  Status wait = WaitUntilServing(Options(), "", std::chrono::milliseconds(300),
                                 std::chrono::milliseconds(50));
  EXPECT_EQ(wait.code(), StatusCode::kUnavailable);
  EXPECT_NE(wait.message().find("NOT_SERVING"), std::string::npos) << wait.message();
}

TEST_F(HealthTest, StoppedServerIsUnavailableNamingTheTarget) {
  Stop();
  auto st = CheckHealth(Options());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(st.status().message().find(target_), std::string::npos) << st.status().message();
}

TEST_F(HealthTest, BadTargetIsAUsageError) {
  ConnectOptions o;
  o.target = "no-port";
  EXPECT_EQ(CheckHealth(o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HealthTest, WaitsForAServerThatStartsLater) {
  const std::string addr = target_;
  const ConnectOptions options = Options();
  Stop();
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    Start(addr);
  });
  Status st =
      WaitUntilServing(options, "", std::chrono::seconds(30), std::chrono::milliseconds(50));
  starter.join();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace embstore::client
