// Out-of-line helpers the per-ISA kernels call to grow their output (see parse_impl.h for why
// these must not be compiled with ISA flags). Private to the converter.
#ifndef EMBSTORE_CONVERT_SRC_KERNEL_COMMON_H_
#define EMBSTORE_CONVERT_SRC_KERNEL_COMMON_H_

#include <cstddef>
#include <cstdint>

#include "embstore/convert/parse_kernels.h"

namespace embstore::convert {

// Grows out->values by `bytes` and returns a pointer to the new bytes.
std::byte* AppendRow(ChunkResult* out, std::size_t bytes);
// Shrinks out->values to `rows` rows of `row_bytes`.
void TruncateRows(ChunkResult* out, std::uint64_t rows, std::size_t row_bytes);
// Appends a key and the chunk line of its row.
void PushKey(ChunkResult* out, const char* key, std::size_t len, std::uint32_t line);

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_KERNEL_COMMON_H_
