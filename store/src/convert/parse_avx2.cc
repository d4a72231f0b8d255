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

// The AVX2 policy adds a four-wide binary32 encoder.
struct Avx2Isa : SimdIsa<xsimd::avx2> {
  static constexpr bool kBatchF32 = true;
  static constexpr std::uint32_t kBatch = 4;

  // Exact doubles of unsigned 32-bit lanes held in 64-bit lanes: x | bits(2^52) is the double
  // 2^52 + x, so subtracting 2^52 leaves x.
  static __m256d U32ToDouble(__m256i x) {
    const __m256d two52 = _mm256_set1_pd(4503599627370496.0);
    return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(x, _mm256_castpd_si256(two52))),
                         two52);
  }

  // Avx512Isa::EncodeF32Batch, four lanes. fl(w) comes from its exact 32-bit halves,
  // hi * 2^32 + lo, rounded once by the addition, as a direct conversion would be.
  static std::uint32_t EncodeF32Batch(const std::uint64_t* w, const std::int32_t* q,
                                      const std::uint32_t* sign, const std::uint8_t* plain,
                                      std::uint32_t* out, std::uint32_t* inf) {
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
    const __m256i low32 = _mm256_set1_epi64x(0xffffffff);
    const __m256d wd = _mm256_add_pd(
        _mm256_mul_pd(U32ToDouble(_mm256_srli_epi64(wv, 32)), _mm256_set1_pd(4294967296.0)),
        U32ToDouble(_mm256_and_si256(wv, low32)));
    const __m128i qv = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
    const __m128i in_table32 =
        _mm_andnot_si128(_mm_cmplt_epi32(qv, _mm_set1_epi32(kApproxPow10Min)),
                         _mm_cmpgt_epi32(_mm_set1_epi32(kApproxPow10Max + 1), qv));
    const __m256i in_table = _mm256_cvtepi32_epi64(in_table32);
    const __m128i idx = _mm_and_si128(_mm_sub_epi32(qv, _mm_set1_epi32(kApproxPow10Min)),
                                      in_table32);
    const __m256d pow10 = _mm256_mask_i32gather_pd(_mm256_setzero_pd(), kApproxPow10, idx,
                                                   _mm256_castsi256_pd(in_table), 8);
    const __m256d d = _mm256_mul_pd(wd, pow10);
    const __m256i db = _mm256_castpd_si256(d);
    const __m256i normal =
        _mm256_cmpgt_epi64(_mm256_srli_epi64(db, 52), _mm256_set1_epi64x(1023 - 126));
    // SafelyAwayFromHalfway with signed compares: |rem - half| > 8.
    const __m256i t = _mm256_sub_epi64(_mm256_and_si256(db, _mm256_set1_epi64x(0x1fffffff)),
                                       _mm256_set1_epi64x(0x10000000));
    const __m256i away = _mm256_or_si256(_mm256_cmpgt_epi64(t, _mm256_set1_epi64x(8)),
                                         _mm256_cmpgt_epi64(_mm256_set1_epi64x(-8), t));
    const __m256i zero = _mm256_cmpeq_epi64(wv, _mm256_setzero_si256());
    std::int32_t plain4;
    std::memcpy(&plain4, plain, 4);
    const __m256i not_plain =
        _mm256_cmpeq_epi64(_mm256_cvtepu8_epi64(_mm_cvtsi32_si128(plain4)), _mm256_setzero_si256());
    const __m256i done64 = _mm256_andnot_si256(
        not_plain,
        _mm256_or_si256(_mm256_and_si256(in_table, _mm256_and_si256(normal, away)), zero));
    // The low halves of the four 64-bit lane masks, as 32-bit lane masks.
    const __m128i done32 = _mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(done64, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
    const __m128i bits = _mm_castps_si128(_mm256_cvtpd_ps(d));
    _mm_maskstore_epi32(reinterpret_cast<int*>(out), done32,
                        _mm_or_si128(bits, _mm_loadu_si128(reinterpret_cast<const __m128i*>(sign))));
    const auto done = static_cast<std::uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(done64)));
    *inf = done & static_cast<std::uint32_t>(_mm_movemask_ps(
                      _mm_castsi128_ps(_mm_cmpeq_epi32(bits, _mm_set1_epi32(0x7f800000)))));
    return done;
  }
};

}  // namespace

void ParseChunkAvx2(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<Avx2Isa>(text, params, out);
}

}  // namespace embstore::store::convert
