// MappingGuard: keeps a read-only file mapping from killing the process when the file underneath
// is truncated or fails to read (docs/PROTOCOL.md, "Files changed under the server").
//
// The kernel answers a load from a mapped page that no longer has file data behind it with SIGBUS.
// A process-wide SIGBUS handler looks the faulting address up among the registered ranges; when it
// lies in one, the handler puts a zero-filled anonymous page in place of the bad page, marks the
// range poisoned and returns, so the faulting load completes (it reads zeros). Code that reads
// mapped bytes checks poisoned() afterwards and reports the data as lost instead of using it;
// clients catch any zeros that were already sent through the block checksums. A fault outside every
// registered range goes to the previous handler (by default: the process dies, as it would without
// the guard).
//
// Thread safety: Register/unregister and poisoned() may run on any thread, concurrently with
// faults on other threads. The registry is a fixed array of atomics read by the signal handler.
#ifndef EMBSTORE_SERVER_SRC_MAPPING_GUARD_H_
#define EMBSTORE_SERVER_SRC_MAPPING_GUARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "embstore/common/status.h"

namespace embstore::server {

class MappingGuard {
 public:
  // Installs the handler (once per process) and registers `range`. ResourceExhausted when every
  // slot is taken (kMaxGuardedMappings tables mapped at once).
  static Result<std::unique_ptr<MappingGuard>> Register(std::span<const std::byte> range);
  ~MappingGuard();  // unregisters; the caller unmaps only after this
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;

  // True once a fault in the range has been answered with zeros.
  bool poisoned() const;

  // Faults answered with zeros in this process, over all ranges.
  static std::uint64_t TotalFaultsAbsorbed();

 private:
  explicit MappingGuard(int slot) : slot_(slot) {}
  int slot_;
};

inline constexpr int kMaxGuardedMappings = 4096;

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_MAPPING_GUARD_H_
