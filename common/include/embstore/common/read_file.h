// Reads a whole small file (TLS certificates and keys, tokens, config files) into memory, and
// positional reads that finish.
#ifndef EMBSTORE_COMMON_READ_FILE_H_
#define EMBSTORE_COMMON_READ_FILE_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore {

// The bytes of `path`. Errors say what the file is for: "cannot read TLS CA file 'ca.pem': No
// such file or directory" (NotFound, PermissionDenied or IOError, from errno), or InvalidArgument
// "... it is larger than N bytes" past `max_bytes` (so a wrong path such as /dev/zero cannot
// exhaust memory).
Result<std::string> ReadSmallFile(const std::string& path, std::string_view what,
                                  std::size_t max_bytes = 16u << 20);

// Reads all of `out` from `fd` at `offset` (pread(2), retried across short reads and EINTR;
// the file offset is never used). Errors start with `what`: errno's, or "... the file ended N
// bytes early (truncated underneath?)".
Status ReadAllAt(int fd, std::uint64_t offset, std::span<std::byte> out, std::string_view what);

}  // namespace embstore

#endif  // EMBSTORE_COMMON_READ_FILE_H_
