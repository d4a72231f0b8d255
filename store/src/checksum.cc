#include "embstore/store/checksum.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace embstore::store {

std::uint64_t Checksum64(std::span<const std::byte> bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

std::uint64_t DefaultBlockRows(std::uint64_t row_bytes) {
  if (row_bytes == 0) return 1;
  return std::max<std::uint64_t>(1, kTargetBlockBytes / row_bytes);
}

}  // namespace embstore::store
