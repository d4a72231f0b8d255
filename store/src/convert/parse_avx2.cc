// The AVX2 kernel: 32-byte blocks. Compiled with -mavx2 (store/CMakeLists.txt); only reached
// when the CPU has AVX2 (kernel_common.cc).
#include "convert/simd_isa.h"

namespace embstore::store::convert {
namespace {

template <>
std::uint32_t ToMask<xsimd::avx2, std::uint32_t>(
    const xsimd::batch_bool<std::int8_t, xsimd::avx2>& b) {
  // One bit per byte: the top bit of each all-ones/all-zeros lane.
  return static_cast<std::uint32_t>(_mm256_movemask_epi8(b));
}

}  // namespace

void ParseChunkAvx2(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<SimdIsa<xsimd::avx2>>(text, params, out);
}

}  // namespace embstore::store::convert
