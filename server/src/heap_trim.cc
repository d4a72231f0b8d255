#include "heap_trim.h"

#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <mutex>

#include "embstore/common/malloc_settings.h"

#if defined(__GLIBC__)
#include <dlfcn.h>
#include <malloc.h>
#endif

namespace embstore::server {
namespace {

#if defined(__GLIBC__)
// Anonymous resident bytes not accounted for by malloc's allocations: free heap pages still
// resident, plus a little that is not the heap at all (thread stacks); only its growth matters.
// Bytes malloc has handed out, from the arenas and by mmap. mallinfo2 (glibc 2.33) is looked up
// at run time, because the portable build runs on glibc 2.28; older glibcs have only mallinfo,
// whose int fields wrap past 2 GiB (the heap growth this watches is far smaller). The field
// layouts are glibc's: ten size_t (mallinfo2) or int (mallinfo) counters in this order.
template <typename T>
struct MallInfo {
  T arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
std::uint64_t MallocUsedBytes() {
  using Info2 = MallInfo<std::size_t> (*)();
  using Info1 = MallInfo<int> (*)();
  static void* const info2 = ::dlsym(RTLD_DEFAULT, "mallinfo2");
  static void* const info1 = ::dlsym(RTLD_DEFAULT, "mallinfo");
  if (info2 != nullptr) {
    const auto mi = reinterpret_cast<Info2>(info2)();
    return mi.uordblks + mi.hblkhd;
  }
  if (info1 != nullptr) {
    const auto mi = reinterpret_cast<Info1>(info1)();
    return static_cast<std::uint32_t>(mi.uordblks) + static_cast<std::uint64_t>(
                                                        static_cast<std::uint32_t>(mi.hblkhd));
  }
  return 0;
}

std::uint64_t FreeResidentHeap() {
  const std::uint64_t anon = AnonymousRssBytes();
  const std::uint64_t used = MallocUsedBytes();
  return anon > used ? anon - used : 0;
}
#endif

}  // namespace

void FixHeapThresholds() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    if (MallocThresholdsSetByOperator()) return;  // the operator's settings win
    ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kServerMmapThreshold));
    ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kServerTrimThreshold));
  });
#endif
}

std::uint64_t AnonymousRssBytes() {
  // /proc/self/statm: size resident shared text lib data dt, in pages; "shared" counts the
  // file-backed and shared-memory pages, so resident - shared is the anonymous RSS.
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0, shared = 0;
  const int n = std::fscanf(f, "%llu %llu %llu", &size, &resident, &shared);
  std::fclose(f);
  if (n != 3 || resident < shared) return 0;
  return (resident - shared) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::uint64_t HeapTrimmer::MaybeTrim() {
#if defined(__GLIBC__)
  const std::uint64_t free_before = FreeResidentHeap();
  if (free_before < baseline_ + threshold_) {
    if (free_before < baseline_) baseline_ = free_before;
    return 0;
  }
  const std::uint64_t anon_before = AnonymousRssBytes();
  ::malloc_trim(0);
  const std::uint64_t anon_after = AnonymousRssBytes();
  // What stays free but resident (pieces smaller than a page) is not worth another trim until
  // the heap grows again.
  baseline_ = FreeResidentHeap();
  return anon_before > anon_after ? anon_before - anon_after : 0;
#else
  return 0;
#endif
}

}  // namespace embstore::server
