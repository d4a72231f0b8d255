// Positional writes that finish: pwrite(2)/pwritev(2) retried across short writes and EINTR.
//
// Safe to call from several threads on one descriptor for disjoint ranges (the file offset is
// never used), which is how parallel downloads write their pieces into one output file.
#ifndef EMBSTORE_COMMON_WRITE_FILE_H_
#define EMBSTORE_COMMON_WRITE_FILE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore {

// Writes all of `bytes` at `offset` of `fd`. Errors name `what` (a path, or what the file is).
Status WriteAllAt(int fd, std::uint64_t offset, std::span<const std::byte> bytes,
                  std::string_view what);

// Writes `pieces`, one after another, at `offset` of `fd`: one system call for many pieces (at
// most IOV_MAX a call), so the bytes go from wherever they lie into the file without being
// gathered first.
Status WriteAllAt(int fd, std::uint64_t offset, std::span<const std::span<const std::byte>> pieces,
                  std::string_view what);

}  // namespace embstore

#endif  // EMBSTORE_COMMON_WRITE_FILE_H_
