#include "embstore/testkit/hdfs_server.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "loopback.h"

namespace embstore::testkit {
namespace {

std::string Script() { return EMBSTORE_HDFS_SERVER_SCRIPT; }

constexpr auto kStartLimit = std::chrono::seconds(240);  // a JVM on two busy cores

}  // namespace

bool HdfsRequired() {
  const char* v = std::getenv("EMBSTORE_REQUIRE_HDFS");
  return v != nullptr && std::string(v) == "1";
}

HdfsServer::HdfsServer() : dir_(new TempDir("hdfs")) {
  // Only a cluster that is already built: fetching Hadoop's jars takes minutes.
  ChildProcess where("/bin/bash", {Script(), "--where"});
  if (where.Wait() != 0) {
    why_ = "the HDFS test cluster is not built: run `bash scripts/hdfs-server.sh --build` (" +
           where.Stderr() + ")";
    return;
  }
  for (int attempt = 0; attempt < 5 && !ok_ && why_.empty(); ++attempt) {
    const int port = internal::RandomPort();
    if (!internal::PortFree(port) || !internal::PortFree(port + 1)) continue;
    ok_ = StartOn(port);
  }
  if (!ok_ && why_.empty()) why_ = "no free ports for the HDFS test cluster";
}

HdfsServer::~HdfsServer() {
  if (child_) child_->Stop(SIGTERM);
}

std::string HdfsServer::url() const { return "hdfs://127.0.0.1:" + std::to_string(port_); }

bool HdfsServer::StartOn(int port) {
  child_ = std::make_unique<ChildProcess>(
      "/bin/bash",
      std::vector<std::string>{Script(), dir_->path() + "/data", std::to_string(port)});
  const auto limit = std::chrono::steady_clock::now() + kStartLimit;
  while (std::chrono::steady_clock::now() < limit) {
    if (child_->HasExited()) {
      why_ = "the HDFS test cluster exited: " + child_->Stderr();
      child_.reset();
      return false;
    }
    // The control port answers once the cluster is up, DataNodes included.
    if (internal::HttpStatus(port + 1, "GET", "/datanodes") == 200) {
      port_ = port;
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  why_ = "the HDFS test cluster was not up within 240 s: " + child_->Stderr();
  child_.reset();
  return false;
}

bool HdfsServer::StopDataNode(int index) {
  return internal::HttpStatus(port_ + 1, "POST", "/datanode/stop?index=" + std::to_string(index)) ==
         200;
}

bool HdfsServer::RestartDataNode(int index) {
  return internal::HttpStatus(port_ + 1, "POST",
                              "/datanode/restart?index=" + std::to_string(index)) == 200;
}

}  // namespace embstore::testkit
