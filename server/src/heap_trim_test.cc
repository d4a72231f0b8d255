#include "heap_trim.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "embstore/testkit/sanitizers.h"

namespace embstore::server {
namespace {

using testkit::kSanitizedHeap;

TEST(HeapTrimmer, GivesBackFreedHeapMemoryThatGlibcKeeps) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "trimming is glibc's";
#endif
  if (kSanitizedHeap) GTEST_SKIP() << "the sanitizer's allocator replaces glibc's";
  HeapTrimmer trimmer(16u << 20);
  trimmer.MaybeTrim();  // start from a trimmed heap
  EXPECT_EQ(trimmer.MaybeTrim(), 0u);
  // 64 MiB in blocks below malloc's mmap threshold, as gRPC's read buffers are; the last block
  // stays allocated, so the heap's top cannot shrink and glibc keeps the rest when freed.
  constexpr std::size_t kBlock = 64 << 10;
  std::vector<std::unique_ptr<char[]>> blocks;
  for (int i = 0; i < 1024; ++i) {
    blocks.emplace_back(new char[kBlock]);
    std::memset(blocks.back().get(), i & 0xff, kBlock);
  }
  const std::uint64_t full = AnonymousRssBytes();
  for (std::size_t i = 0; i + 1 < blocks.size(); ++i) blocks[i].reset();
  const std::uint64_t freed = AnonymousRssBytes();
  EXPECT_GT(freed, full - (16u << 20)) << "glibc returned the memory by itself";
  const std::uint64_t released = trimmer.MaybeTrim();
  EXPECT_GE(released, 48u << 20);
  EXPECT_LT(AnonymousRssBytes(), freed - (48u << 20));
  EXPECT_EQ(trimmer.MaybeTrim(), 0u);  // nothing new to give back
}

}  // namespace
}  // namespace embstore::server
