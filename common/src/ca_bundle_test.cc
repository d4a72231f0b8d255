#include "embstore/common/ca_bundle.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>

namespace embstore {
namespace {

// Restores SSL_CERT_FILE as it was.
class CaBundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("SSL_CERT_FILE")) saved_ = v, had_ = true;
  }
  void TearDown() override {
    if (had_) {
      setenv("SSL_CERT_FILE", saved_.c_str(), 1);
    } else {
      unsetenv("SSL_CERT_FILE");
    }
  }
  std::string saved_;
  bool had_ = false;
};

TEST_F(CaBundleTest, TheOperatorsFileWinsEvenWhenMissing) {
  setenv("SSL_CERT_FILE", "/nonexistent/bundle.pem", 1);
  EXPECT_EQ(SystemCaBundle(), "/nonexistent/bundle.pem");
}

TEST_F(CaBundleTest, OtherwiseAnExistingDistributionBundle) {
  unsetenv("SSL_CERT_FILE");
  const std::string got = SystemCaBundle();
  struct stat st {};
  const bool debian = ::stat("/etc/ssl/certs/ca-certificates.crt", &st) == 0;
  if (debian) {
    EXPECT_EQ(got, "/etc/ssl/certs/ca-certificates.crt");
  } else if (!got.empty()) {
    EXPECT_EQ(::stat(got.c_str(), &st), 0) << got;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << got;
  }
  setenv("SSL_CERT_FILE", "", 1);  // empty counts as unset
  EXPECT_EQ(SystemCaBundle(), got);
}

}  // namespace
}  // namespace embstore
