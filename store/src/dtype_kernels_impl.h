// Private: generic dtype conversion loops, included once per ISA with EMBSTORE_KERNEL_NS set.
// The loops are written so the compiler vectorizes them under each file's -m flags; where a
// conversion has a dedicated instruction (F16C / AVX-512 vcvtph2ps, vcvtps2ph) it is used directly.
// Each loop's scalar meaning is the matching function in dtype.cc (F16ToF32, F32ToBF16, ...).
// Checksum64 is XXH3-64 compiled the same way: xxhash picks its widest vector code from the
// file's flags (SSE2 for the scalar level, AVX2, AVX-512, NEON), and every one of them computes
// the same hash.
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__aarch64__) && defined(EMBSTORE_KERNEL_NEON)
#include <arm_neon.h>
#endif

// GCC 12 reports a temporary inside avx512fintrin.h as uninitialized where xxhash's AVX-512 code
// is inlined (the false positive noted at F16ToF32 below); silenced for xxhash only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "dtype_kernels.h"

namespace embstore::store::kernels::EMBSTORE_KERNEL_NS {

inline std::uint64_t Checksum64(const void* data, std::size_t n) { return XXH3_64bits(data, n); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

inline std::uint32_t Bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float FromBits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16 is the top half of an f32: widening is a 16-bit shift.
inline void Bf16ToF32(const std::uint16_t* src, float* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = FromBits(static_cast<std::uint32_t>(src[i]) << 16);
}

// Round to nearest even by adding 0x7FFF plus the lowest kept bit, then truncating; a carry out
// of the mantissa correctly bumps the exponent (up to infinity). NaNs are quieted instead, since
// the add could carry a NaN into infinity.
inline std::uint16_t Bf16Bits(std::uint32_t u) {
  std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  std::uint32_t quiet_nan = (u >> 16) | 0x0040u;
  bool is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<std::uint16_t>(is_nan ? quiet_nan : rounded);
}

inline void F32ToBf16(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = Bf16Bits(Bits(src[i]));
}

// The index of the first finite value of src[0, n) whose magnitude bits reach `limit` (it rounds
// to infinity in the narrower type), or n: the checked conversions' slow path.
inline std::size_t FirstOverflow(const float* src, std::size_t n, std::uint32_t limit) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t mag = Bits(src[i]) & 0x7FFFFFFFu;
    if (mag >= limit && mag < 0x7F800000u) return i;
  }
  return n;
}

// F32ToBf16 with the overflow check fused in: one pass converts a block and keeps the largest of
// its outputs shifted left by one (the sign dropped), on 16-bit lanes, half as many vectors as the
// inputs would take. A finite input overflows exactly when its output is infinity (0x7F80, so
// 0xFF00 shifted; NaNs are above, and count too, so the hot loop has no finite test). Only a block
// that reaches 0xFF00 is looked at again, on its inputs, for a finite value that reaches
// kBF16OverflowBits. Returns that value's index (dst then written to the end of its block), or n.
inline std::size_t F32ToBf16Checked(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t b = 0; b < n; b += kCheckBlock) {
    const std::size_t m = std::min(kCheckBlock, n - b);
    std::uint16_t top = 0;
    for (std::size_t i = b; i < b + m; ++i) {
      const std::uint16_t h = Bf16Bits(Bits(src[i]));
      dst[i] = h;
      top = std::max(top, static_cast<std::uint16_t>(h << 1));
    }
    if (top >= 0xFF00u) {
      const std::size_t at = FirstOverflow(src + b, m, kBF16OverflowBits);
      if (at < m) return b + at;
    }
  }
  return n;
}

// Scalar IEEE binary16 -> binary32, exact. Subnormals are scaled by 2^-24 in f32 (exact).
inline float HalfToFloat(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t man = h & 0x3FFu;
  if (exp == 0) {
    float mag = static_cast<float>(man) * 5.9604644775390625e-8f;  // man * 2^-24
    return FromBits(Bits(mag) | sign);
  }
  if (exp == 31) return FromBits(sign | 0x7F800000u | (man << 13));
  return FromBits(sign | ((exp + 112u) << 23) | (man << 13));
}

// Scalar binary32 -> binary16, round to nearest even; |x| >= 65520 becomes infinity; NaN keeps
// its top payload bits and is quieted (what vcvtps2ph does).
inline std::uint16_t FloatToHalf(float f) {
  std::uint32_t x = Bits(f);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {
    if (x == 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7C00u);
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((x >> 13) & 0x3FFu));
  }
  if (x >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520
  if (x < 0x38800000u) {  // below 2^-14: a binary16 subnormal (or zero)
    std::uint32_t e = x >> 23;
    if (e < 102) return static_cast<std::uint16_t>(sign);  // below 2^-25: rounds to zero
    std::uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
    std::uint32_t shift = 126 - e;  // value = m * 2^(e-150), in units of 2^-24
    std::uint32_t r = m >> shift;
    std::uint32_t rem = m & ((1u << shift) - 1);
    std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<std::uint16_t>(sign | r);
  }
  std::uint32_t r = ((((x >> 23) - 112u) << 10) | ((x & 0x7FFFFFu) >> 13));
  std::uint32_t rem = x & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // a carry into the exponent is right
  return static_cast<std::uint16_t>(sign | r);
}

// GCC 12's AVX-512 conversion intrinsics trip -Wmaybe-uninitialized on an internal temporary of
// avx512fintrin.h (a false positive); silence it for these two loops only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

inline void F16ToF32(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(h));
  }
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
#elif defined(__aarch64__) && defined(EMBSTORE_KERNEL_NEON)
  // FCVTL widens exactly, subnormals and NaN payloads included (FPCR.FZ16 is off on Linux).
  for (; i + 8 <= n; i += 8) {
    const float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(src + i));
    vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
  }
#endif
  for (; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}

inline void F32ToF16(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) {
    __m256i h =
        _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
  }
#elif defined(__F16C__)
  // Two vectors an iteration, as F32ToF16Checked (measured faster on AMD Zen).
  for (; i + 16 <= n; i += 16) {
    const __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i h2 = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), h2);
  }
  for (; i + 8 <= n; i += 8) {
    __m128i h =
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
#elif defined(__aarch64__) && defined(EMBSTORE_KERNEL_NEON)
  // FCVTN rounds to nearest even (FPCR's default mode), overflows to infinity and quiets NaNs
  // keeping their top payload bits: FloatToHalf's results, lane for lane.
  for (; i + 8 <= n; i += 8) {
    const float16x4_t lo = vcvt_f16_f32(vld1q_f32(src + i));
    const float16x8_t h = vcvt_high_f16_f32(lo, vld1q_f32(src + i + 4));
    vst1q_u16(dst + i, vreinterpretq_u16_f16(h));
  }
#endif
  for (; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}

// F32ToF16 with the overflow check fused in, as F32ToBf16Checked. The vector loops look at the
// converted halves, not the inputs: a finite input overflows exactly when its half is infinity,
// i.e. when (h << 1), which drops the sign, reaches 0xF800 (infinities and NaNs). Ops on the
// 16-bit halves are half the width of ops on the inputs (one 128-bit op per 8 values on AVX2,
// which AMD Zen 1 splits when 256 bits wide). AVX2 keeps two maxima per block: signed (its
// largest positive half) and unsigned (its largest negative one, or a positive one when there is
// none); shifting both once per block answers the question with no shift per vector. A block
// that reaches the limit is looked at again, on its inputs, for a finite value that overflows.
inline std::size_t F32ToF16Checked(const float* src, std::uint16_t* dst, std::size_t n) {
  for (std::size_t b = 0; b < n; b += kCheckBlock) {
    const std::size_t end = b + std::min(kCheckBlock, n - b);
    std::size_t i = b;
    bool reached = false;
#if defined(__AVX512F__)
    __m256i pos = _mm256_setzero_si256(), neg = _mm256_setzero_si256();
    for (; i + 16 <= end; i += 16) {
      const __m256i h =
          _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), h);
      pos = _mm256_max_epi16(pos, h);
      neg = _mm256_max_epu16(neg, h);
    }
    const __m256i top = _mm256_max_epu16(_mm256_slli_epi16(pos, 1), _mm256_slli_epi16(neg, 1));
    // Some lane of top >= 0xF800: max(top, 0xF800) == top there.
    reached = _mm256_movemask_epi8(_mm256_cmpeq_epi16(
                  _mm256_max_epu16(top, _mm256_set1_epi16(-0x800)), top)) != 0;
#elif defined(__F16C__)
    __m128i pos = _mm_setzero_si128(), neg = _mm_setzero_si128();
    for (; i + 16 <= end; i += 16) {
      const __m128i h =
          _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      const __m128i h2 = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), h2);
      pos = _mm_max_epi16(pos, _mm_max_epi16(h, h2));
      neg = _mm_max_epu16(neg, _mm_max_epu16(h, h2));
    }
    __m128i top = _mm_max_epu16(_mm_slli_epi16(pos, 1), _mm_slli_epi16(neg, 1));
    // Some lane of top >= 0xF800: max(top, 0xF800) == top there.
    reached = _mm_movemask_epi8(
                  _mm_cmpeq_epi16(_mm_max_epu16(top, _mm_set1_epi16(-0x800)), top)) != 0;
#else
    // Elsewhere F32ToF16's loop converts the block, which is then scanned while it is in L1.
    F32ToF16(src + i, dst + i, end - i);
    std::uint32_t top = 0;
    for (; i < end; ++i) top = std::max(top, Bits(src[i]) & 0x7FFFFFFFu);
    reached = top >= kF16OverflowBits;
#endif
    for (; i < end; ++i) {  // the vector loops' tail
      dst[i] = FloatToHalf(src[i]);
      reached |= (Bits(src[i]) & 0x7FFFFFFFu) >= kF16OverflowBits;
    }
    if (reached) {
      const std::size_t at = FirstOverflow(src + b, end - b, kF16OverflowBits);
      if (at < end - b) return b + at;
    }
  }
  return n;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace embstore::store::kernels::EMBSTORE_KERNEL_NS
