#include "embstore/testkit/s3_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

namespace embstore::testkit {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

bool PortFree(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  // As the server binds (Go sets SO_REUSEADDR): a port whose old connections linger in
  // TIME_WAIT after a kill is free for it.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = Loopback(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// The script uses PORT..PORT+3 and each of those plus 10000.
bool PortsFree(int port) {
  for (int i = 0; i < 4; ++i) {
    if (!PortFree(port + i) || !PortFree(port + 10000 + i)) return false;
  }
  return true;
}

// GET /status answered 200.
bool Answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a = Loopback(port);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  bool ok = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /status HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[64] = {0};
      const ssize_t n = ::recv(fd, buf, sizeof buf - 1, 0);
      ok = n > 12 && std::strncmp(buf + 9, "200", 3) == 0;
    }
  }
  ::close(fd);
  return ok;
}

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
  std::mt19937 rng(static_cast<unsigned>(::getpid()) ^
                   static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  for (int attempt = 0; attempt < 5 && !ok_; ++attempt) {
    const int port = 20000 + static_cast<int>(rng() % 25000);
    if (!PortsFree(port)) continue;
    ok_ = StartOn(port);
  }
  if (!ok_ && why_.empty()) why_ = "no free ports for the S3 test server";
}

S3Server::~S3Server() { Kill(); }

bool S3Server::StartOn(int port) {
  child_ = std::make_unique<ChildProcess>("/bin/bash",
                                          std::vector<std::string>{Script(), dir_->path(),
                                                                   std::to_string(port)});
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
