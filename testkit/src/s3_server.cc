#include "embstore/testkit/s3_server.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "loopback.h"

namespace embstore::testkit {
namespace {

// The script uses PORT..PORT+3 and each of those plus 10000.
bool PortsFree(int port) {
  for (int i = 0; i < 4; ++i) {
    if (!internal::PortFree(port + i) || !internal::PortFree(port + 10000 + i)) return false;
  }
  return true;
}

// GET /status answered 200.
bool Answers(int port) { return internal::HttpStatus(port, "GET", "/status") == 200; }

std::string Script() { return EMBSTORE_S3_SERVER_SCRIPT; }

}  // namespace

bool S3Required() {
  const char* v = std::getenv("EMBSTORE_REQUIRE_S3");
  return v != nullptr && std::string(v) == "1";
}

S3Server::S3Server() : dir_(new TempDir("s3")) {
  // Only a server that is already built: building it takes minutes (test.sh does it first).
  ChildProcess where("/bin/bash", {Script(), "--where"});
  if (where.Wait() != 0) {
    why_ = "the S3 test server is not built: run `bash scripts/s3-server.sh --build` (" +
           where.Stderr() + ")";
    return;
  }
  ::setenv("S3_ACCESS_KEY", kAccessKey, 1);
  ::setenv("S3_SECRET_KEY", kSecretKey, 1);
  for (int attempt = 0; attempt < 5 && !ok_; ++attempt) {
    const int port = internal::RandomPort();
    if (!PortsFree(port)) continue;
    ok_ = StartOn(port);
  }
  if (!ok_ && why_.empty()) why_ = "no free ports for the S3 test server";
}

S3Server::~S3Server() { Kill(); }

bool S3Server::StartOn(int port) {
  child_ = std::make_unique<ChildProcess>(
      "/bin/bash", std::vector<std::string>{Script(), dir_->path(), std::to_string(port)});
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < limit) {
    if (child_->HasExited()) {
      why_ = "the S3 test server exited: " + child_->Stderr();
      child_.reset();
      return false;
    }
    if (Answers(port)) {
      port_ = port;
      endpoint_ = "http://127.0.0.1:" + std::to_string(port);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  why_ = "the S3 test server did not answer within 90 s: " + child_->Stderr();
  child_.reset();
  return false;
}

void S3Server::Kill() {
  if (child_) child_->Stop(SIGKILL);
  child_.reset();
}

bool S3Server::Start() {
  ok_ = port_ != 0 && StartOn(port_);
  return ok_;
}

bool S3Server::Restart() {
  Kill();
  // The killed server's ports may linger a moment.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!PortsFree(port_) && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Start();
}

}  // namespace embstore::testkit
