#include "embstore/common/read_file.h"

#include <gtest/gtest.h>

#include "embstore/testkit/temp_dir.h"

namespace embstore {
namespace {

TEST(ReadSmallFile, ReadsEveryByte) {
  testkit::TempDir dir("read-file-test");
  std::string bytes(200000, 'x');
  bytes[7] = '\0';
  testkit::WriteFileOrDie(dir.File("f"), bytes);
  auto got = ReadSmallFile(dir.File("f"), "test file");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, bytes);
}

TEST(ReadSmallFile, ErrorsNameTheFileAndWhatItIsFor) {
  testkit::TempDir dir("read-file-test");
  auto missing = ReadSmallFile(dir.File("nope.pem"), "TLS CA file");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot read TLS CA file '" + dir.File("nope.pem") +
                                            "': No such file or directory"),
            std::string::npos)
      << missing.status().message();
  auto a_dir = ReadSmallFile(dir.path(), "TLS key");
  ASSERT_FALSE(a_dir.ok());
  EXPECT_NE(a_dir.status().message().find("Is a directory"), std::string::npos)
      << a_dir.status().message();
  auto endless = ReadSmallFile("/dev/zero", "token file", 1 << 20);
  ASSERT_FALSE(endless.ok());
  EXPECT_NE(endless.status().message().find("larger than 1048576 bytes"), std::string::npos)
      << endless.status().message();
}

}  // namespace
}  // namespace embstore
