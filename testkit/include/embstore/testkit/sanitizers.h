// What tests need to know about the sanitizers they were built with.
#ifndef EMBSTORE_TESTKIT_SANITIZERS_H_
#define EMBSTORE_TESTKIT_SANITIZERS_H_

namespace embstore::testkit {

// True under AddressSanitizer, whose allocator replaces glibc's and keeps freed memory in
// quarantine: tests of how much memory a process gives back skip themselves.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitizedHeap = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitizedHeap = true;
#else
inline constexpr bool kSanitizedHeap = false;
#endif
#else
inline constexpr bool kSanitizedHeap = false;
#endif

}  // namespace embstore::testkit

#endif  // EMBSTORE_TESTKIT_SANITIZERS_H_
