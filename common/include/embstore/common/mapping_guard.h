// MappingGuard: keeps a read-only file mapping from killing the process when the file underneath
// is truncated or fails to read (docs/FORMAT.md, "Readers and files changed underneath").
//
// The kernel answers a load from a mapped page that no longer has file data behind it with SIGBUS.
// A process-wide SIGBUS handler looks the faulting address up among the registered ranges; when it
// lies in one, the handler puts a zero-filled anonymous page in place of the bad page, marks the
// range poisoned and returns, so the faulting load completes (it reads zeros). Code that reads
// mapped bytes checks poisoned() afterwards and reports the data as lost instead of using it
// (store::Table does this for every reader of a table file). A fault outside every registered
// range goes to the previous handler (by default: the process dies, as it would without the
// guard).
//
// Every mapping of a file the project reads is registered: table files (store::Table, in the
// server, the client's local path, the CLI and the Python module) and the converter's mapped
// input. Registering re-installs the handler if another library (Python's faulthandler, say)
// replaced it since, keeping that library's handler as the one faults outside the ranges go to.
//
// Thread safety: Register/unregister and poisoned() may run on any thread, concurrently with
// faults on other threads. The registry is a fixed array of atomics read by the signal handler.
#ifndef EMBSTORE_COMMON_MAPPING_GUARD_H_
#define EMBSTORE_COMMON_MAPPING_GUARD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "embstore/common/status.h"

namespace embstore {

class MappingGuard {
 public:
  // Installs the handler (once per process, again if it was replaced) and registers `range`.
  // ResourceExhausted when every slot is taken (kMaxGuardedMappings mappings at once). An empty
  // range registers nothing (poisoned() stays false).
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

}  // namespace embstore

#endif  // EMBSTORE_COMMON_MAPPING_GUARD_H_
