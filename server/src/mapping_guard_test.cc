#include "mapping_guard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "test_util.h"

namespace embstore::server {
namespace {

TEST(MappingGuard, TruncatedFileReadsZerosInsteadOfKillingTheProcess) {
  testing::TempDir dir;
  const std::string path = dir.File("f.bin");
  const long page = ::sysconf(_SC_PAGESIZE);
  testing::WriteWholeFile(path, std::string(4 * page, '\x5a'));
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
  testing::TempDir dir;
  const std::string path = dir.File("g.bin");
  const long page = ::sysconf(_SC_PAGESIZE);
  testing::WriteWholeFile(path, std::string(2 * page, 'x'));
  // Install the handler, then fault in a mapping nobody registered.
  auto unrelated = MappingGuard::Register(std::span<const std::byte>());
  ASSERT_TRUE(unrelated.ok());
  EXPECT_DEATH(
      {
        int fd = ::open(path.c_str(), O_RDONLY);
        void* m = ::mmap(nullptr, 2 * page, PROT_READ, MAP_SHARED, fd, 0);
        (void)::truncate(path.c_str(), 0);
        volatile unsigned char c = static_cast<const volatile unsigned char*>(m)[page];
        (void)c;
      },
      "");
}

}  // namespace
}  // namespace embstore::server
