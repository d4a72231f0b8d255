// Whether the operator configured glibc's allocator for this process: the client and the server
// each set glibc's mmap and trim thresholds for their own workloads (the client's receive
// buffers, the server's request floods), and must leave them alone when someone already did.
#ifndef EMBSTORE_COMMON_MALLOC_SETTINGS_H_
#define EMBSTORE_COMMON_MALLOC_SETTINGS_H_

#include <cstdlib>
#include <cstring>

namespace embstore {

// True when MALLOC_MMAP_THRESHOLD_ or MALLOC_TRIM_THRESHOLD_ is set, or GLIBC_TUNABLES holds a
// glibc.malloc tunable. Reads the environment: call it once, before threads change it.
inline bool MallocThresholdsSetByOperator() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  return std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
         std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
         (tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr);
}

}  // namespace embstore

#endif  // EMBSTORE_COMMON_MALLOC_SETTINGS_H_
