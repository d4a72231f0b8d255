// Test-only: a GoogleTest fixture with one real HDFS cluster (testkit::HdfsServer) per test
// binary, skipped when it is not built unless EMBSTORE_REQUIRE_HDFS=1. Header-only, for test
// binaries that link GoogleTest and embstore::objstore.
#ifndef EMBSTORE_TESTKIT_HDFS_TEST_FIXTURE_H_
#define EMBSTORE_TESTKIT_HDFS_TEST_FIXTURE_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include "embstore/objstore/webhdfs.h"
#include "embstore/testkit/hdfs_server.h"

namespace embstore::testkit {

class HdfsServerTest : public ::testing::Test {
 protected:
  static testkit::HdfsServer& Server() {
    static testkit::HdfsServer server;  // one per binary, stopped at exit
    return server;
  }
  void SetUp() override {
    if (!Server().ok()) {
      if (testkit::HdfsRequired()) FAIL() << Server().why();
      GTEST_SKIP() << Server().why();
    }
  }
  // The cluster's superuser is the user that started it: this process's.
  static objstore::HdfsConfig Config() {
    auto c = objstore::HdfsConfigFromEnvironment();
    objstore::HdfsConfig config = c.ok() ? *c : objstore::HdfsConfig{};
    config.first_backoff = std::chrono::milliseconds(50);
    return config;
  }
  // hdfs://127.0.0.1:PORT/PATH
  static objstore::ObjectUrl Url(const std::string& path) {
    return objstore::ObjectUrl{"hdfs", Server().url().substr(7), path};
  }
};

}  // namespace embstore::testkit

#endif  // EMBSTORE_TESTKIT_HDFS_TEST_FIXTURE_H_
