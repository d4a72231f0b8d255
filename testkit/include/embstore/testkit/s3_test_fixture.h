// Test-only: a GoogleTest fixture with one real S3 server (testkit::S3Server) per test binary,
// skipped when the server is not built unless EMBSTORE_REQUIRE_S3=1. Header-only, for test
// binaries that link GoogleTest and embstore::objstore.
#ifndef EMBSTORE_TESTKIT_S3_TEST_FIXTURE_H_
#define EMBSTORE_TESTKIT_S3_TEST_FIXTURE_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include "embstore/objstore/s3.h"
#include "embstore/testkit/s3_server.h"

namespace embstore::testkit {

class S3ServerTest : public ::testing::Test {
 protected:
  static testkit::S3Server& Server() {
    static testkit::S3Server server;  // one per binary, stopped at exit
    return server;
  }
  void SetUp() override {
    if (!Server().ok()) {
      if (testkit::S3Required()) FAIL() << Server().why();
      GTEST_SKIP() << Server().why();
    }
  }
  // The server's endpoint and test keys, as an S3Config.
  static objstore::S3Config Config() {
    objstore::S3Config c;
    c.endpoint = Server().endpoint();
    c.access_key = testkit::S3Server::kAccessKey;
    c.secret_key = testkit::S3Server::kSecretKey;
    return c;
  }
  // The same through the AWS_* variables, as users configure embstore (for code that reads
  // objstore::S3ConfigFromEnvironment).
  static void ExportEnvironment() {
    ::setenv("AWS_ENDPOINT_URL", Server().endpoint().c_str(), 1);
    ::setenv("AWS_ACCESS_KEY_ID", testkit::S3Server::kAccessKey, 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", testkit::S3Server::kSecretKey, 1);
    ::setenv("AWS_REGION", "us-east-1", 1);
  }
};

}  // namespace embstore::testkit

#endif  // EMBSTORE_TESTKIT_S3_TEST_FIXTURE_H_
