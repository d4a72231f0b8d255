// Private: HeapTrimmer gives freed memory of the C heap back to the kernel after a burst.
//
// glibc keeps what the program frees for reuse and returns only the top of its heaps by itself.
// After a burst of large allocations that are all freed again (gRPC buffers every request whole
// before it checks the size limit, so a flood of 100 MB requests allocates and frees hundreds of
// MB), most of that memory stays resident for good. MaybeTrim() measures the heap's free
// resident memory (anonymous RSS minus what malloc has handed out) and calls malloc_trim(0)
// when it has grown by at least `threshold` since the last trim; malloc_trim releases every
// free page of every arena, not just the top.
//
// A no-op where the C library is not glibc. Thread safety: MaybeTrim may be called from one
// thread at a time; it is safe with allocations going on in others.
#ifndef EMBSTORE_SERVER_SRC_HEAP_TRIM_H_
#define EMBSTORE_SERVER_SRC_HEAP_TRIM_H_

#include <cstdint>

namespace embstore::server {

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
