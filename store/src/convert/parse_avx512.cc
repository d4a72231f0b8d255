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

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused merge source, which
// -Wmaybe-uninitialized misreports once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The AVX-512 policy adds the eight-wide binary32 encoder (AVX-512F/DQ: unsigned 64-bit to
// double conversion, gathers and per-lane masks).
struct Avx512Isa : SimdIsa<xsimd::avx512bw, xsimd::avx2> {
  static constexpr bool kBatchF32 = true;
  static constexpr std::uint32_t kBatch = 8;

  // Lane for lane, FastF32 for plain decimals (w = 0 included) whose approximate double is
  // provably rounded right; other lanes are left alone and their bit stays clear in the result.
  static std::uint32_t EncodeF32Batch(const std::uint64_t* w, const std::int32_t* q,
                                   const std::uint32_t* sign, const std::uint8_t* plain,
                                   std::uint32_t* out, std::uint32_t* inf) {
    const __m512i wv = _mm512_loadu_si512(w);
    const __m256i qv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
    const __mmask8 in_table =
        _mm256_cmp_epi32_mask(qv, _mm256_set1_epi32(kApproxPow10Min), _MM_CMPINT_NLT) &
        _mm256_cmp_epi32_mask(qv, _mm256_set1_epi32(kApproxPow10Max), _MM_CMPINT_LE);
    const __m256i idx = _mm256_sub_epi32(qv, _mm256_set1_epi32(kApproxPow10Min));
    const __m512d pow10 =
        _mm512_mask_i32gather_pd(_mm512_setzero_pd(), in_table, idx, kApproxPow10, 8);
    const __m512d d = _mm512_mul_pd(_mm512_cvtepu64_pd(wv), pow10);
    const __m512i db = _mm512_castpd_si512(d);
    const __m512i rem = _mm512_and_si512(db, _mm512_set1_epi64(0x1fffffff));
    const __mmask8 normal =
        _mm512_cmpgt_epu64_mask(_mm512_srli_epi64(db, 52), _mm512_set1_epi64(1023 - 126));
    // SafelyAwayFromHalfway: rem - half + 8 > 16, wrapping.
    const __mmask8 away = _mm512_cmpgt_epu64_mask(
        _mm512_add_epi64(rem, _mm512_set1_epi64(8 - 0x10000000)), _mm512_set1_epi64(16));
    const __mmask8 zero = _mm512_cmpeq_epi64_mask(wv, _mm512_setzero_si512());
    const __mmask8 is_plain = _mm_cmpneq_epi8_mask(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(plain)), _mm_setzero_si128());
    const __mmask8 done = is_plain & ((in_table & normal & away) | zero);
    const __m256i bits = _mm256_castps_si256(_mm512_cvtpd_ps(d));
    _mm256_mask_storeu_epi32(out, done,
                             _mm256_or_si256(bits, _mm256_loadu_si256(
                                                       reinterpret_cast<const __m256i*>(sign))));
    *inf = done & _mm256_cmpeq_epi32_mask(bits, _mm256_set1_epi32(0x7f800000));
    return done;
  }
};

#pragma GCC diagnostic pop

}  // namespace

void ParseChunkAvx512(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<Avx512Isa>(text, params, out);
}

}  // namespace embstore::store::convert
