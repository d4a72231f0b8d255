#include "embstore/common/mapping_guard.h"
#include "embstore/testkit/temp_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace embstore {
namespace {

// A file of `n` copies of `c` in a fresh temporary directory, removed at the end of the test.
class TempFile {
 public:
  TempFile(std::size_t n, char c) {
    path_ = dir_.File("f.bin");
    testkit::WriteFileOrDie(path_, std::string(n, c));
  }
  const std::string& path() const { return path_; }
  // For death tests, whose child process dies without running destructors: removes the file and
  // its directory now (an open descriptor and its mapping stay valid).
  void RemoveNow() const { std::filesystem::remove_all(dir_.path()); }

 private:
  testkit::TempDir dir_{"guard-test"};
  std::string path_;
};

TEST(MappingGuard, TruncatedFileReadsZerosInsteadOfKillingTheProcess) {
  const long page = ::sysconf(_SC_PAGESIZE);
  TempFile file(4 * page, '\x5a');
  const std::string& path = file.path();
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  void* m = ::mmap(nullptr, 4 * page, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* bytes = static_cast<const volatile unsigned char*>(m);
  auto guard = MappingGuard::Register(
      std::span<const std::byte>(static_cast<const std::byte*>(m), 4 * page));
  ASSERT_TRUE(guard.ok());
  EXPECT_EQ(bytes[3 * page], 0x5a);
  EXPECT_FALSE((*guard)->poisoned());

  ASSERT_EQ(::truncate(path.c_str(), page), 0);
  const auto before = MappingGuard::TotalFaultsAbsorbed();
  EXPECT_EQ(bytes[0], 0x5a);          // still backed by the file
  EXPECT_EQ(bytes[2 * page + 7], 0);  // past the new end: SIGBUS absorbed, zeros read
  EXPECT_EQ(bytes[3 * page], 0);
  EXPECT_TRUE((*guard)->poisoned());
  EXPECT_GE(MappingGuard::TotalFaultsAbsorbed(), before + 2);
  guard->reset();
  ::munmap(m, 4 * page);
  ::close(fd);
}

TEST(MappingGuardDeathTest, FaultOutsideEveryGuardedRangeStillKills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const long page = ::sysconf(_SC_PAGESIZE);
  TempFile file(2 * page, 'x');
  const std::string& path = file.path();
  // Install the handler, then fault in a mapping nobody registered.
  auto unrelated = MappingGuard::Register(std::span<const std::byte>());
  ASSERT_TRUE(unrelated.ok());
  EXPECT_DEATH(
      {
        int fd = ::open(path.c_str(), O_RDWR);
        void* m = ::mmap(nullptr, 2 * page, PROT_READ, MAP_SHARED, fd, 0);
        file.RemoveNow();
        (void)::ftruncate(fd, 0);
        volatile unsigned char c = static_cast<const volatile unsigned char*>(m)[page];
        (void)c;
      },
      "");
}

void WriteMarkerAndReturn(int) {
  static const char kMsg[] = "previous handler ran\n";
  (void)!::write(2, kMsg, sizeof kMsg - 1);
}

TEST(MappingGuardDeathTest, OtherFaultsReachTheReplacedHandlerOnceThenKill) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const long page = ::sysconf(_SC_PAGESIZE);
  TempFile file(2 * page, 'x');
  const std::string& path = file.path();
  EXPECT_DEATH(
      {
        // A library installs its handler after ours (as faulthandler.enable() would); the next
        // Register puts ours back in front and keeps theirs for faults that are not ours. Theirs
        // returns without fixing anything: the process must still die, not loop.
        struct sigaction sa {};
        sa.sa_handler = WriteMarkerAndReturn;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, nullptr);
        auto again = MappingGuard::Register(std::span<const std::byte>());
        int fd = ::open(path.c_str(), O_RDWR);
        void* m = ::mmap(nullptr, 2 * page, PROT_READ, MAP_SHARED, fd, 0);
        file.RemoveNow();
        (void)::ftruncate(fd, 0);
        volatile unsigned char c = static_cast<const volatile unsigned char*>(m)[page];
        (void)c;
      },
      "previous handler ran");
}

}  // namespace
}  // namespace embstore
