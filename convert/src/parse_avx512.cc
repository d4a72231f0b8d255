// The AVX-512 kernel: 64-byte blocks with mask registers for scans, 32-byte digit blocks
// (simd_isa.h says why). Compiled with -mavx512bw and friends
// (convert/CMakeLists.txt); only reached when the CPU has them (kernel_common.cc).
#include "simd_isa.h"

namespace embstore::convert {
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
// -Wuninitialized and -Wmaybe-uninitialized misreport once inlined (which one depends on -O).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// The AVX-512 policy adds the eight-wide binary32 encoder (AVX-512F/DQ: unsigned 64-bit to
// double conversion, gathers and per-lane masks).
struct Avx512Isa : SimdIsa<xsimd::avx512bw, xsimd::avx2> {
  static constexpr bool kBatchF32 = true;
  static constexpr std::uint32_t kBatch = 8;

  // The 16 bytes at p[0..4), one per 128-bit lane.
  static __m512i Load4x16(const char* const* p) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p[0])));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[1])), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[2])), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p[3])), 3);
  }

  // Digits16 per 128-bit lane of digit values 0..9 (the 16-digit number, first digit in byte
  // 0): pairs, fours, eights (multiply-adds), then the two eights; the value lands in each
  // lane's qword 0 (and 1).
  static __m512i Digits16x4(__m512i digits) {
    __m512i x = _mm512_maddubs_epi16(digits, _mm512_set1_epi16(0x010a));
    x = _mm512_madd_epi16(x, _mm512_set1_epi32(0x00010064));
    x = _mm512_packus_epi32(x, x);
    x = _mm512_madd_epi16(x, _mm512_set1_epi32(0x00012710));
    return _mm512_add_epi64(_mm512_mul_epu32(x, _mm512_set1_epi64(100000000)),
                            _mm512_srli_epi64(x, 32));
  }

  // FastF32's rule on eight lanes: w * 10^q (q as int32) as the approximate double, rounded to
  // binary32 where that is provably right (w = 0 included) and the lane is `eligible`; those
  // lanes are stored, with the sign bit from `negative`, and returned; *inf marks the ones that
  // rounded to infinity.
  static __mmask8 EncodeStore8(__m512i w, __m256i q, __mmask8 eligible, __mmask8 negative,
                               std::uint32_t* out, __mmask8* inf) {
    __mmask8 in_table;
    const __m512d pow10 = GatherPow10(q, &in_table);
    return EncodeStore8(w, pow10, static_cast<__mmask8>(eligible & in_table), negative, out, inf);
  }

  // kApproxPow10[q] for eight int32 exponents; *in_table marks the lanes whose q it holds (the
  // others get 0).
  static __m512d GatherPow10(__m256i q, __mmask8* in_table) {
    *in_table = _mm256_cmp_epi32_mask(q, _mm256_set1_epi32(kApproxPow10Min), _MM_CMPINT_NLT) &
                _mm256_cmp_epi32_mask(q, _mm256_set1_epi32(kApproxPow10Max), _MM_CMPINT_LE);
    const __m256i idx = _mm256_sub_epi32(q, _mm256_set1_epi32(kApproxPow10Min));
    return _mm512_mask_i32gather_pd(_mm512_setzero_pd(), *in_table, idx, kApproxPow10, 8);
  }

  // FastSmall's rule on eight lanes, for the 16-bit formats (`precision` significand bits,
  // exponent `bias`): the approximate double w * 10^q rounded to `precision` bits with integer
  // operations wherever no halfway point of the format lies within 8 of its ulps; those lanes
  // are stored (16 bits each, sign from `negative`) and returned; *inf marks overflows. The
  // double is never subnormal here (w >= 1 and |q| <= 64).
  static __mmask8 EncodeStoreSmall8(__m512i w, __m512d pow10, __mmask8 eligible, __mmask8 negative,
                                    int precision, int bias, std::uint16_t* out, __mmask8* inf) {
    const __m512i one = _mm512_set1_epi64(1);
    const __m512d d = _mm512_mul_pd(_mm512_cvtepu64_pd(w), pow10);
    const __m512i db = _mm512_castpd_si512(d);
    // value = m * 2^(e - 52)
    const __m512i m = _mm512_or_si512(_mm512_and_si512(db, _mm512_set1_epi64((1ll << 52) - 1)),
                                      _mm512_set1_epi64(1ll << 52));
    const __m512i e = _mm512_sub_epi64(_mm512_srli_epi64(db, 52), _mm512_set1_epi64(1023));
    const __m512i emin = _mm512_set1_epi64(1 - bias);
    // Below the normal range fewer bits survive: the shift grows by emin - e.
    const __m512i shift =
        _mm512_add_epi64(_mm512_set1_epi64(52 - (precision - 1)),
                         _mm512_max_epi64(_mm512_sub_epi64(emin, e), _mm512_setzero_si512()));
    const __mmask8 shift_ok = _mm512_cmple_epi64_mask(shift, _mm512_set1_epi64(60));
    __m512i n = _mm512_srlv_epi64(m, shift);
    const __m512i rem = _mm512_and_si512(m, _mm512_sub_epi64(_mm512_sllv_epi64(one, shift), one));
    const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(shift, one));
    const __mmask8 away = _mm512_cmpgt_epu64_mask(
        _mm512_add_epi64(_mm512_sub_epi64(rem, half), _mm512_set1_epi64(8)), _mm512_set1_epi64(16));
    n = _mm512_mask_add_epi64(n, _mm512_cmpgt_epu64_mask(rem, half), n, one);
    __m512i te = _mm512_max_epi64(e, emin);
    // Rounding up past the largest significand: one binade up.
    const __mmask8 carry = _mm512_cmpeq_epi64_mask(n, _mm512_set1_epi64(1ll << precision));
    n = _mm512_mask_srli_epi64(n, carry, n, 1);
    te = _mm512_mask_add_epi64(te, carry, te, one);
    const __mmask8 over = _mm512_cmpgt_epi64_mask(te, _mm512_set1_epi64(bias));
    const __m512i hidden = _mm512_set1_epi64(1ll << (precision - 1));
    const __mmask8 normal = _mm512_cmpge_epu64_mask(n, hidden);
    __m512i bits = _mm512_mask_or_epi64(
        n, normal, _mm512_slli_epi64(_mm512_add_epi64(te, _mm512_set1_epi64(bias)), precision - 1),
        _mm512_sub_epi64(n, hidden));
    const std::int64_t inf_bits = ((1ll << (15 - (precision - 1))) - 1) << (precision - 1);
    bits = _mm512_mask_mov_epi64(bits, over, _mm512_set1_epi64(inf_bits));
    const __mmask8 zero = _mm512_cmpeq_epi64_mask(w, _mm512_setzero_si512());
    bits = _mm512_mask_mov_epi64(bits, zero, _mm512_setzero_si512());
    bits = _mm512_mask_or_epi64(bits, negative, bits, _mm512_set1_epi64(0x8000));
    const __mmask8 done = eligible & ((shift_ok & away) | zero);
    _mm_mask_storeu_epi16(out, done, _mm512_cvtepi64_epi16(bits));
    *inf = done & over & static_cast<__mmask8>(~zero);
    return done;
  }

  // The binary32 or 16-bit rule, for T, into `out` (elements of T).
  template <DType T>
  static __mmask8 EncodeAny8(__m512i w, __m512d pow10, __mmask8 eligible, __mmask8 negative,
                             std::byte* out, __mmask8* inf) {
    if constexpr (T == DType::kF32) {
      return EncodeStore8(w, pow10, eligible, negative, reinterpret_cast<std::uint32_t*>(out), inf);
    } else {
      return EncodeStoreSmall8(w, pow10, eligible, negative, T == DType::kF16 ? 11 : 8,
                               T == DType::kF16 ? 15 : 127, reinterpret_cast<std::uint16_t*>(out),
                               inf);
    }
  }

  // The same with the eight powers of ten given (10^q as kApproxPow10 holds them).
  static __mmask8 EncodeStore8(__m512i w, __m512d pow10, __mmask8 eligible, __mmask8 negative,
                               std::uint32_t* out, __mmask8* inf) {
    const __m512d d = _mm512_mul_pd(_mm512_cvtepu64_pd(w), pow10);
    const __m512i db = _mm512_castpd_si512(d);
    const __m512i rem = _mm512_and_si512(db, _mm512_set1_epi64(0x1fffffff));
    const __mmask8 normal =
        _mm512_cmpgt_epu64_mask(_mm512_srli_epi64(db, 52), _mm512_set1_epi64(1023 - 126));
    // SafelyAwayFromHalfway: rem - half + 8 > 16, wrapping.
    const __mmask8 away = _mm512_cmpgt_epu64_mask(
        _mm512_add_epi64(rem, _mm512_set1_epi64(8 - 0x10000000)), _mm512_set1_epi64(16));
    const __mmask8 zero = _mm512_cmpeq_epi64_mask(w, _mm512_setzero_si512());
    const __mmask8 done = eligible & ((normal & away) | zero);
    const __m256i bits = _mm256_castps_si256(_mm512_cvtpd_ps(d));
    _mm256_mask_storeu_epi32(
        out, done,
        _mm256_or_si256(bits, _mm256_maskz_mov_epi32(negative, _mm256_set1_epi32(INT32_MIN))));
    *inf = done & _mm256_cmpeq_epi32_mask(bits, _mm256_set1_epi32(0x7f800000));
    return done;
  }

  // Lane for lane, FastF32 for plain decimals (w = 0 included) whose approximate double is
  // provably rounded right; other lanes are left alone and their bit stays clear in the result.
  static std::uint32_t EncodeF32Batch(const std::uint64_t* w, const std::int32_t* q,
                                      const std::uint32_t* sign, const std::uint8_t* plain,
                                      std::uint32_t* out, std::uint32_t* inf) {
    const __mmask8 is_plain = _mm_cmpneq_epi8_mask(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(plain)), _mm_setzero_si128());
    const __mmask8 negative = _mm256_cmpneq_epi32_mask(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sign)), _mm256_setzero_si256());
    __mmask8 overflow;
    const __mmask8 done =
        EncodeStore8(_mm512_loadu_si512(w), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)),
                     is_plain, negative, out, &overflow);
    *inf = overflow;
    return done;
  }

  static constexpr bool kShortTokens = true;

  // Eight short tokens at once (see parse_impl.h). Four tokens share a register, one per 128-bit
  // lane; per token, scalar bit operations on its 16-bit masks check the shape and give two
  // bytes that define its shuffle (which drops the point and right-aligns the digits); then, per
  // register, the shuffle, the digit combining of Digits16 and, for all eight, FastF32's rule. A
  // token of at most 15 digits is below 10^16 and at least 10^-15 (or zero): never subnormal nor
  // infinite.
  template <DType T>
  static std::uint32_t ScanEncodeShort8(const char* const* tok, std::byte* out,
                                        std::uint32_t* inf) {
    std::int32_t frac_digits[8];
    std::uint32_t good = 0;
    std::uint32_t negative = 0;
    __m512i w4[2];
    // Byte j of each lane, and the byte of a packed qword (copied to every lane) it reads.
    const __m512i iota = _mm512_set4_epi32(0x0f0e0d0c, 0x0b0a0908, 0x07060504, 0x03020100);
    const __m512i lane_shift = _mm512_set_epi32(
        0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x02020202, 0x02020202, 0x02020202,
        0x02020202, 0x01010101, 0x01010101, 0x01010101, 0x01010101, 0, 0, 0, 0);
    const __m512i lane_limit = _mm512_add_epi8(lane_shift, _mm512_set1_epi8(4));
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const char* const* t = tok + 4 * g;
      const __m512i v = Load4x16(t);
      const __m512i raw = _mm512_sub_epi8(v, _mm512_set1_epi8('0'));
      const std::uint64_t dg = _mm512_cmplt_epu8_mask(raw, _mm512_set1_epi8(10));
      // Digit values, zero in every other byte (so the shuffle may pick signs and points).
      const __m512i digits = _mm512_maskz_mov_epi8(dg, raw);
      const std::uint64_t dot = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('.'));
      const std::uint64_t end = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(' ')) |
                                _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\t')) |
                                _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\n')) |
                                _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\r'));
      // Byte i of `shifts` and of `splits`: token i's (CheckShortToken).
      std::uint64_t shifts = 0;
      std::uint64_t splits = 0;
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int k = 4 * g + i;
        std::uint32_t shift;
        std::uint32_t split;
        const bool ok = CheckShortToken(t[i], static_cast<std::uint32_t>(dg >> (16 * i)) & 0xffffu,
                                        static_cast<std::uint32_t>(dot >> (16 * i)) & 0xffffu,
                                        static_cast<std::uint32_t>(end >> (16 * i)) & 0xffffu,
                                        &frac_digits[k], &shift, &split);
        shifts |= static_cast<std::uint64_t>(shift & 0xff) << (8 * i);
        splits |= static_cast<std::uint64_t>(split & 0xff) << (8 * i);
        good |= static_cast<std::uint32_t>(ok) << k;
        negative |= static_cast<std::uint32_t>(t[i][0] == '-') << k;
      }
      // Byte j of a lane takes token byte j - shift, one further left where that is at or
      // before the point; below the token's first byte the index is negative and the shuffle
      // gives zero. The last digit lands in byte 15.
      const __m512i packed = _mm512_broadcast_i32x4(
          _mm_cvtsi64_si128(static_cast<long long>(shifts | (splits << 32))));
      const __m512i shift_v = _mm512_shuffle_epi8(packed, lane_shift);
      const __m512i split_v = _mm512_shuffle_epi8(packed, lane_limit);
      __m512i index = _mm512_sub_epi8(iota, shift_v);
      index = _mm512_mask_sub_epi8(index, _mm512_cmplt_epu8_mask(iota, split_v), index,
                                   _mm512_set1_epi8(1));
      w4[g] = Digits16x4(_mm512_shuffle_epi8(digits, index));
    }
    // Qwords 0, 2, 4, 6 of each group are the eight significands.
    const __m512i w =
        _mm512_permutex2var_epi64(w4[0], _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), w4[1]);
    const __m256i nf =
        _mm256_setr_epi32(frac_digits[0], frac_digits[1], frac_digits[2], frac_digits[3],
                          frac_digits[4], frac_digits[5], frac_digits[6], frac_digits[7]);
    // 10^-nf for nf in 0..15: one two-register permute instead of a gather.
    const __m512d p10_lo = _mm512_loadu_pd(kApproxPow10 - kApproxPow10Min - 7);   // 10^-7..10^0
    const __m512d p10_hi = _mm512_loadu_pd(kApproxPow10 - kApproxPow10Min - 15);  // 10^-15..10^-8
    // Index i < 8 picks p10_lo[i], 8 + i picks p10_hi[i]: 10^-nf is p10_lo[7 - nf] for nf <= 7,
    // p10_hi[15 - nf] for nf >= 8.
    const __m512i pick = _mm512_cvtepi32_epi64(_mm256_sub_epi32(
        _mm256_add_epi32(
            _mm256_set1_epi32(7),
            _mm256_and_si256(_mm256_cmpgt_epi32(nf, _mm256_set1_epi32(7)), _mm256_set1_epi32(16))),
        nf));
    const __m512d pow10 = _mm512_permutex2var_pd(p10_lo, pick, p10_hi);
    __mmask8 overflow;  // never in f32 (values below 10^16); f16 overflows from 65520
    const __mmask8 done = EncodeAny8<T>(w, pow10, static_cast<__mmask8>(good),
                                        static_cast<__mmask8>(negative), out, &overflow);
    *inf = overflow;
    return done;
  }

  static constexpr bool kSciTokens = true;

  // The fields of eight tokens of any shape CheckSciShape takes: two tokens share a register,
  // one per 256-bit half, and scalar bit operations on each token's 32-bit masks check it.
  static void ScanSciShapes8(const char* const* tok, std::uint64_t* head, std::int32_t* q,
                             const char** tail, std::uint32_t* good_out,
                             std::uint32_t* negative_out) {
    std::uint32_t good = 0;
    std::uint32_t negative = 0;
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const char* const* t = tok + 2 * g;
      __m512i v =
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(t[0])));
      v = _mm512_inserti64x4(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t[1])), 1);
      const std::uint64_t dg =
          _mm512_cmplt_epu8_mask(_mm512_sub_epi8(v, _mm512_set1_epi8('0')), _mm512_set1_epi8(10));
      const std::uint64_t dot = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('.'));
      const std::uint64_t ex =
          _mm512_cmpeq_epi8_mask(_mm512_or_si512(v, _mm512_set1_epi8(0x20)), _mm512_set1_epi8('e'));
      const std::uint64_t sg = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('-')) |
                               _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('+'));
      const std::uint64_t end = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(' ')) |
                                _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\t')) |
                                _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\n')) |
                                _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\r'));
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        const int k = 2 * g + i;
        const char* s = t[i];
        const SciShape sh =
            CheckSciShape(s, (dg >> (32 * i)) & 0xffffffffu, (dot >> (32 * i)) & 0xffffffffu,
                          (ex >> (32 * i)) & 0xffffffffu, (sg >> (32 * i)) & 0xffffffffu,
                          ((end >> (32 * i)) & 0xffffffffu) | (std::uint64_t{1} << 32));
        head[k] = sh.head;
        q[k] = sh.q;
        tail[k] = sh.ok ? s + sh.exp_pos - 16 : s;
        good |= static_cast<std::uint32_t>(sh.ok) << k;
        negative |= static_cast<std::uint32_t>(sh.negative) << k;
      }
    }
    *good_out = good;
    *negative_out = negative;
  }

  // Eight tokens in scientific notation with 16 to 18 fraction digits (np.savetxt's '%.18e' and
  // its kin; see parse_impl.h): by the '%.18e' template where all eight have it, else by
  // ScanSciShapes8. The 16 fraction digits right before the exponent go through Digits16's
  // combining four tokens at a time, and all eight through EncodeAny8.
  template <DType T>
  static std::uint32_t ScanEncodeSci8(const char* const* tok, std::byte* out, std::uint32_t* inf) {
    std::uint64_t head[8];
    std::int32_t q[8];
    const char* tail[8];  // the 16 fraction digits before the exponent
    std::uint32_t good = 0;
    std::uint32_t negative = 0;
    const char* f[8];
    std::uint32_t sign[8];
    if (AllSci18<8>(tok, f, sign)) {
      // All eight have np.savetxt's template: fixed offsets (simd_isa.h).
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        Sci18Fields(f[k], &head[k], &q[k]);
        tail[k] = f[k] + 4;
        negative |= (sign[k] >> 31) << k;
      }
      good = 0xff;
    } else {
      ScanSciShapes8(tok, head, q, tail, &good, &negative);
    }
    __m512i lo4[2];
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      lo4[g] = Digits16x4(_mm512_sub_epi8(Load4x16(tail + 4 * g), _mm512_set1_epi8('0')));
    }
    const __m512i lo =
        _mm512_permutex2var_epi64(lo4[0], _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), lo4[1]);
    const __m512i hv =
        _mm512_setr_epi64(static_cast<long long>(head[0]), static_cast<long long>(head[1]),
                          static_cast<long long>(head[2]), static_cast<long long>(head[3]),
                          static_cast<long long>(head[4]), static_cast<long long>(head[5]),
                          static_cast<long long>(head[6]), static_cast<long long>(head[7]));
    // w = head (already times 10^16) + the last 16 digits: at most 19 digits, below 2^64.
    const __m512i w = _mm512_add_epi64(hv, lo);
    const __m256i qv = _mm256_setr_epi32(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]);
    __mmask8 in_table;
    const __m512d pow10 = GatherPow10(qv, &in_table);
    __mmask8 overflow;
    const __mmask8 done = EncodeAny8<T>(w, pow10, static_cast<__mmask8>(good & in_table),
                                        static_cast<__mmask8>(negative), out, &overflow);
    *inf = overflow;
    return done;
  }

  static constexpr bool kSmallTypes = true;
};

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

void ParseChunkAvx512(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<Avx512Isa>(text, params, out);
}

}  // namespace embstore::convert
