// A real S3 server for tests: SeaweedFS's S3 gateway started through scripts/s3-server.sh on
// free 127.0.0.1 ports, with its data in a TempDir and signature checking on (fixed test keys).
//
// The server binary is built by `scripts/s3-server.sh --build` (test.sh does it before ctest);
// when it is missing, ok() is false and why() says so, and tests skip, unless
// EMBSTORE_REQUIRE_S3=1 (set by test.sh and CI), which makes them fail instead.
#ifndef EMBSTORE_TESTKIT_S3_SERVER_H_
#define EMBSTORE_TESTKIT_S3_SERVER_H_

#include <memory>
#include <string>

#include "embstore/testkit/child_process.h"
#include "embstore/testkit/temp_dir.h"

namespace embstore::testkit {

class S3Server {
 public:
  static constexpr const char* kAccessKey = "embstore-test-key";
  static constexpr const char* kSecretKey = "embstore-test-secret";

  S3Server();  // starts it and waits until it answers
  ~S3Server();
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  bool ok() const { return ok_; }
  const std::string& why() const { return why_; }
  const std::string& endpoint() const { return endpoint_; }  // http://127.0.0.1:PORT
  int port() const { return port_; }

  // Kills the server (SIGKILL: a crash) and starts it again on the same port and data.
  bool Restart();
  void Kill();
  bool Start();  // after Kill()

 private:
  bool StartOn(int port);
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<ChildProcess> child_;
  std::string endpoint_, why_;
  int port_ = 0;
  bool ok_ = false;
};

// EMBSTORE_REQUIRE_S3=1: a missing server is a failure, not a skip.
bool S3Required();

}  // namespace embstore::testkit

#endif  // EMBSTORE_TESTKIT_S3_SERVER_H_
