// Private: HeapTrimmer gives freed memory of the C heap back to the kernel after a burst.
//
// glibc keeps what the program frees for reuse and returns only the top of its heaps by itself.
// After a burst of large allocations that are all freed again (gRPC buffers every request whole
// before it checks the size limit, so a flood of 100 MB requests allocates and frees hundreds of
// MB), most of that memory stays resident for good. MaybeTrim() measures the heap's free
// resident memory (anonymous RSS minus what malloc has handed out) and calls malloc_trim(0)
// when it has grown by at least `threshold` since the last trim; malloc_trim releases the free
// pages inside every arena (the free memory at the top of other threads' arenas only goes back
// under fixed thresholds: FixHeapThresholds).
//
// A no-op where the C library is not glibc. Thread safety: MaybeTrim may be called from one
// thread at a time; it is safe with allocations going on in others.
#ifndef EMBSTORE_SERVER_SRC_HEAP_TRIM_H_
#define EMBSTORE_SERVER_SRC_HEAP_TRIM_H_

#include <cstdint>

namespace embstore::server {

// glibc adapts its thresholds to what a process frees: once a block above the mmap threshold
// (128 KiB at first) is freed, it raises that threshold to the block's size and the trim
// threshold to twice that, up to 32 and 64 MiB. A flood of large requests (a 1 MB malformed
// Lookup is enough) thus makes every arena keep up to 64 MiB free at its top, which
// malloc_trim does not release for the arenas of threads other than the main one. The server
// fixes both thresholds once at start, which turns the adaptation off: allocations of at least
// kServerMmapThreshold are mapped and returned when freed, and free memory beyond
// kServerTrimThreshold at the top of a heap goes back at once. Nothing changes when the operator
// set glibc's malloc tunables or thresholds (GLIBC_TUNABLES, MALLOC_*_THRESHOLD_). The server's
// own allocations are small: rows are sent from the mapped files.
inline constexpr std::uint64_t kServerMmapThreshold = 256u << 10;
inline constexpr std::uint64_t kServerTrimThreshold = 1u << 20;
void FixHeapThresholds();

// Anonymous resident memory of this process (RSS less file-backed and shared pages), in bytes;
// 0 when /proc is not readable.
std::uint64_t AnonymousRssBytes();

class HeapTrimmer {
 public:
  explicit HeapTrimmer(std::uint64_t threshold) : threshold_(threshold) {}

  // Trims when the free resident heap grew by `threshold` or more since the last trim (or
  // since construction). Returns the bytes the trim gave back, 0 when it did not trim.
  std::uint64_t MaybeTrim();

 private:
  std::uint64_t threshold_;
  std::uint64_t baseline_ = 0;  // free resident heap after the last trim, or its low since
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_HEAP_TRIM_H_
