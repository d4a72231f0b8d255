// Test-only: a GoogleTest fixture with one real S3 server (testkit::S3Server) per test binary,
// skipped when the server is not built unless EMBSTORE_REQUIRE_S3=1.
#ifndef EMBSTORE_OBJSTORE_SRC_S3_TEST_FIXTURE_H_
#define EMBSTORE_OBJSTORE_SRC_S3_TEST_FIXTURE_H_

#include <gtest/gtest.h>

#include "embstore/objstore/s3.h"
#include "embstore/testkit/s3_server.h"

namespace embstore::objstore {

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
  static S3Config Config() {
    S3Config c;
    c.endpoint = Server().endpoint();
    c.access_key = testkit::S3Server::kAccessKey;
    c.secret_key = testkit::S3Server::kSecretKey;
    return c;
  }
};

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_SRC_S3_TEST_FIXTURE_H_
