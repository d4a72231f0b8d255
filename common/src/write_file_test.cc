#include "embstore/common/write_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <thread>
#include <vector>

#include "embstore/common/read_file.h"
#include "embstore/testkit/temp_dir.h"

namespace embstore {
namespace {

std::span<const std::byte> Bytes(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

TEST(WriteAllAt, ManyPiecesOfEverySizeLandInOrder) {
  // More pieces than one pwritev takes (IOV_MAX), empty ones among them.
  testkit::TempDir dir("write-file-test");
  std::vector<std::string> storage;
  std::string expected;
  for (int i = 0; i < 3 * IOV_MAX + 17; ++i) {
    storage.push_back(std::string(static_cast<std::size_t>(i % 7 == 0 ? 0 : i % 97 + 1),
                                  static_cast<char>('a' + i % 26)));
    expected += storage.back();
  }
  std::vector<std::span<const std::byte>> pieces;
  for (const auto& s : storage) pieces.push_back(Bytes(s));
  const int fd = ::open(dir.File("f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(WriteAllAt(fd, 5, Bytes("head!"), "f").ok());
  ASSERT_TRUE(WriteAllAt(fd, 0, Bytes("HEAD!"), "f").ok());
  Status st = WriteAllAt(fd, 5, pieces, "f");
  ::close(fd);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto got = ReadSmallFile(dir.File("f"), "test file", 1 << 24);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "HEAD!" + expected);
}

TEST(WriteAllAt, ThreadsWriteDisjointRangesOfOneFile) {
  testkit::TempDir dir("write-file-test");
  const int fd = ::open(dir.File("f").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_GE(fd, 0);
  constexpr int kThreads = 4;
  constexpr std::size_t kPart = 1 << 20;
  std::vector<std::thread> threads;
  std::vector<Status> results(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Each thread writes its part back to front, in 4 KiB pieces.
      std::string part(kPart, static_cast<char>('0' + t));
      for (std::size_t off = kPart; off > 0 && results[t].ok(); off -= 4096) {
        results[t] = WriteAllAt(fd, t * kPart + off - 4096,
                                Bytes(part).subspan(off - 4096, 4096), "f");
      }
    });
  }
  for (auto& th : threads) th.join();
  ::close(fd);
  for (const auto& r : results) ASSERT_TRUE(r.ok()) << r.ToString();
  auto got = ReadSmallFile(dir.File("f"), "test file", 1 << 24);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), kThreads * kPart);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(got->substr(t * kPart, kPart), std::string(kPart, static_cast<char>('0' + t)));
  }
}

TEST(WriteAllAt, ErrorsNameWhatWasWritten) {
  const int full = ::open("/dev/full", O_WRONLY);
  ASSERT_GE(full, 0);
  const std::string data(1000, 'x');
  const std::span<const std::byte> pieces[] = {Bytes(data), Bytes(data)};
  Status st = WriteAllAt(full, 0, pieces, "out.npy");
  ::close(full);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("write 'out.npy'"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("No space left on device"), std::string::npos) << st.message();
  testkit::TempDir dir("write-file-test");
  testkit::WriteFileOrDie(dir.File("ro"), "x");
  const int ro = ::open(dir.File("ro").c_str(), O_RDONLY);
  st = WriteAllAt(ro, 0, Bytes(data), dir.File("ro"));
  ::close(ro);
  EXPECT_EQ(st.code(), StatusCode::kIOError);
  EXPECT_NE(st.message().find(dir.File("ro")), std::string::npos) << st.message();
}

}  // namespace
}  // namespace embstore
