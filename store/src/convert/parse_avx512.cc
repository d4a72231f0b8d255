// The AVX-512 kernel: 64-byte blocks with mask registers for scans, 32-byte digit blocks
// (simd_isa.h says why). Compiled with -mavx512bw and friends
// (store/CMakeLists.txt); only reached when the CPU has them (kernel_common.cc).
#include "convert/simd_isa.h"

namespace embstore::store::convert {
namespace {

template <>
std::uint64_t ToMask<xsimd::avx512bw, std::uint64_t>(
    const xsimd::batch_bool<std::int8_t, xsimd::avx512bw>& b) {
  // AVX-512 comparisons already produce one bit per byte in a mask register.
  return static_cast<std::uint64_t>(b.data);
}

template <>
std::uint32_t ToMask<xsimd::avx2, std::uint32_t>(
    const xsimd::batch_bool<std::int8_t, xsimd::avx2>& b) {
  return static_cast<std::uint32_t>(_mm256_movemask_epi8(b));
}

}  // namespace

void ParseChunkAvx512(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<SimdIsa<xsimd::avx512bw, xsimd::avx2>>(text, params, out);
}

}  // namespace embstore::store::convert
