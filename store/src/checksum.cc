#include "embstore/store/checksum.h"

#include <algorithm>

#include "dtype_kernels.h"

namespace embstore::store {

std::uint64_t Checksum64(std::span<const std::byte> bytes) {
  return kernels::ActiveKernels().checksum64(bytes.data(), bytes.size());
}

std::uint64_t Checksum64On(simd::Isa isa, std::span<const std::byte> bytes) {
  return kernels::KernelsFor(isa).checksum64(bytes.data(), bytes.size());
}

std::uint64_t DefaultBlockRows(std::uint64_t row_bytes) {
  if (row_bytes == 0) return 1;
  return std::max<std::uint64_t>(1, kTargetBlockBytes / row_bytes);
}

}  // namespace embstore::store
