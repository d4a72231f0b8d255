// The AVX2 kernel: 32-byte blocks. Compiled with -mavx2 (convert/CMakeLists.txt); only reached
// when the CPU has AVX2 (kernel_common.cc).
#include "simd_isa.h"

namespace embstore::convert {
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

  // The 16 bytes at a and at b, one per 128-bit lane.
  static __m256i Load2x16(const char* a, const char* b) {
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
  }

  // Avx512Isa::Digits16x4, two lanes.
  static __m256i Digits16x2(__m256i digits) {
    __m256i x = _mm256_maddubs_epi16(digits, _mm256_set1_epi16(0x010a));
    x = _mm256_madd_epi16(x, _mm256_set1_epi32(0x00010064));
    x = _mm256_packus_epi32(x, x);
    x = _mm256_madd_epi16(x, _mm256_set1_epi32(0x00012710));
    return _mm256_add_epi64(_mm256_mul_epu32(x, _mm256_set1_epi64x(100000000)),
                            _mm256_srli_epi64(x, 32));
  }

  // Exact doubles of unsigned 32-bit lanes held in 64-bit lanes: x | bits(2^52) is the double
  // 2^52 + x, so subtracting 2^52 leaves x.
  static __m256d U32ToDouble(__m256i x) {
    const __m256d two52 = _mm256_set1_pd(4503599627370496.0);
    return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(x, _mm256_castpd_si256(two52))),
                         two52);
  }

  // fl(w) for unsigned 64-bit lanes, from their exact 32-bit halves, hi * 2^32 + lo, rounded
  // once by the addition, as a direct conversion (AVX-512 only) would be.
  static __m256d WToDouble(__m256i w) {
    return _mm256_add_pd(
        _mm256_mul_pd(U32ToDouble(_mm256_srli_epi64(w, 32)), _mm256_set1_pd(4294967296.0)),
        U32ToDouble(_mm256_and_si256(w, _mm256_set1_epi64x(0xffffffff))));
  }

  // The approximate powers of ten for four exponents, from kApproxPow10 by four scalar loads
  // (a gather is microcoded on AMD Zen: slower than the loads), 0.0 where q is outside the
  // table; *in_table is all ones in the lanes inside it.
  static __m256d Pow10x4(const std::int32_t* q, __m256i* in_table) {
    constexpr auto kSpan = static_cast<std::uint32_t>(kApproxPow10Max - kApproxPow10Min);
    std::uint32_t idx[4];
    bool in[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      idx[k] = static_cast<std::uint32_t>(q[k] - kApproxPow10Min);
      in[k] = idx[k] <= kSpan;
      idx[k] = in[k] ? idx[k] : 0;
    }
    *in_table = _mm256_setr_epi64x(-static_cast<long long>(in[0]), -static_cast<long long>(in[1]),
                                   -static_cast<long long>(in[2]), -static_cast<long long>(in[3]));
    return _mm256_and_pd(_mm256_setr_pd(kApproxPow10[idx[0]], kApproxPow10[idx[1]],
                                        kApproxPow10[idx[2]], kApproxPow10[idx[3]]),
                         _mm256_castsi256_pd(*in_table));
  }

  // Avx512Isa::EncodeStore8, four lanes: `eligible` holds all-ones 64-bit lanes, `sign` the
  // sign bit of each 32-bit lane. All four lanes are stored: the caller overwrites those not
  // done (a masked store is microcoded on AMD Zen).
  static std::uint32_t EncodeStore4(__m256i w, const std::int32_t* q, __m256i eligible,
                                    __m128i sign, std::uint32_t* out, std::uint32_t* inf) {
    __m256i in_table;
    const __m256d d = _mm256_mul_pd(WToDouble(w), Pow10x4(q, &in_table));
    const __m256i db = _mm256_castpd_si256(d);
    const __m256i normal =
        _mm256_cmpgt_epi64(_mm256_srli_epi64(db, 52), _mm256_set1_epi64x(1023 - 126));
    // SafelyAwayFromHalfway with signed compares: |rem - half| > 8.
    const __m256i t = _mm256_sub_epi64(_mm256_and_si256(db, _mm256_set1_epi64x(0x1fffffff)),
                                       _mm256_set1_epi64x(0x10000000));
    const __m256i away = _mm256_or_si256(_mm256_cmpgt_epi64(t, _mm256_set1_epi64x(8)),
                                         _mm256_cmpgt_epi64(_mm256_set1_epi64x(-8), t));
    const __m256i zero = _mm256_cmpeq_epi64(w, _mm256_setzero_si256());
    const __m256i done64 = _mm256_and_si256(
        eligible,
        _mm256_or_si256(_mm256_and_si256(in_table, _mm256_and_si256(normal, away)), zero));
    const __m128i bits = _mm_castps_si128(_mm256_cvtpd_ps(d));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_or_si128(bits, sign));
    const auto done = static_cast<std::uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(done64)));
    *inf = done & static_cast<std::uint32_t>(_mm_movemask_ps(
                      _mm_castsi128_ps(_mm_cmpeq_epi32(bits, _mm_set1_epi32(0x7f800000)))));
    return done;
  }

  static std::uint32_t EncodeF32Batch(const std::uint64_t* w, const std::int32_t* q,
                                      const std::uint32_t* sign, const std::uint8_t* plain,
                                      std::uint32_t* out, std::uint32_t* inf) {
    std::int32_t plain4;
    std::memcpy(&plain4, plain, 4);
    const __m256i is_plain = _mm256_xor_si256(
        _mm256_cmpeq_epi64(_mm256_cvtepu8_epi64(_mm_cvtsi32_si128(plain4)), _mm256_setzero_si256()),
        _mm256_set1_epi64x(-1));
    return EncodeStore4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)), q, is_plain,
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(sign)), out, inf);
  }

  // Avx512Isa::EncodeStoreSmall8, four lanes (AVX2 has no unsigned 64-bit compares nor 64-bit
  // max: every quantity here is below 2^62, so the signed compares are right): the approximate
  // double rounded to `precision` bits with integer operations wherever no halfway point of the
  // format lies within 8 of its ulps. All four lanes are stored (16 bits each, sign from the
  // 32-bit lanes of `sign`); the caller overwrites those not done.
  static std::uint32_t EncodeStoreSmall4(__m256i w, const std::int32_t* q, __m256i eligible,
                                         __m128i sign, int precision, int bias, std::uint16_t* out,
                                         std::uint32_t* inf) {
    const __m256i one = _mm256_set1_epi64x(1);
    __m256i in_table;
    const __m256d d = _mm256_mul_pd(WToDouble(w), Pow10x4(q, &in_table));
    const __m256i db = _mm256_castpd_si256(d);
    // value = m * 2^(e - 52)
    const __m256i m = _mm256_or_si256(_mm256_and_si256(db, _mm256_set1_epi64x((1ll << 52) - 1)),
                                      _mm256_set1_epi64x(1ll << 52));
    const __m256i e = _mm256_sub_epi64(_mm256_srli_epi64(db, 52), _mm256_set1_epi64x(1023));
    const __m256i emin = _mm256_set1_epi64x(1 - bias);
    // Below the normal range fewer bits survive: the shift grows by max(emin - e, 0).
    const __m256i below = _mm256_sub_epi64(emin, e);
    const __m256i shift = _mm256_add_epi64(
        _mm256_set1_epi64x(52 - (precision - 1)),
        _mm256_and_si256(below, _mm256_cmpgt_epi64(below, _mm256_setzero_si256())));
    const __m256i shift_ok = _mm256_cmpgt_epi64(_mm256_set1_epi64x(61), shift);
    __m256i n = _mm256_srlv_epi64(m, shift);
    const __m256i rem =
        _mm256_and_si256(m, _mm256_sub_epi64(_mm256_sllv_epi64(one, shift), one));
    const __m256i half = _mm256_sllv_epi64(one, _mm256_sub_epi64(shift, one));
    const __m256i t = _mm256_sub_epi64(rem, half);
    const __m256i away = _mm256_or_si256(_mm256_cmpgt_epi64(t, _mm256_set1_epi64x(8)),
                                         _mm256_cmpgt_epi64(_mm256_set1_epi64x(-8), t));
    n = _mm256_sub_epi64(n, _mm256_cmpgt_epi64(rem, half));  // + 1 where above half
    __m256i te = _mm256_blendv_epi8(emin, e, _mm256_cmpgt_epi64(e, emin));
    // Rounding up past the largest significand: one binade up.
    const __m256i carry = _mm256_cmpeq_epi64(n, _mm256_set1_epi64x(1ll << precision));
    n = _mm256_blendv_epi8(n, _mm256_srli_epi64(n, 1), carry);
    te = _mm256_sub_epi64(te, carry);
    const __m256i over = _mm256_cmpgt_epi64(te, _mm256_set1_epi64x(bias));
    const __m256i hidden = _mm256_set1_epi64x(1ll << (precision - 1));
    const __m256i subnormal = _mm256_cmpgt_epi64(hidden, n);
    const __m256i normal_bits = _mm256_or_si256(
        _mm256_sll_epi64(_mm256_add_epi64(te, _mm256_set1_epi64x(bias)),
                         _mm_cvtsi32_si128(precision - 1)),
        _mm256_sub_epi64(n, hidden));
    __m256i bits = _mm256_blendv_epi8(normal_bits, n, subnormal);
    const long long inf_bits = ((1ll << (15 - (precision - 1))) - 1) << (precision - 1);
    bits = _mm256_blendv_epi8(bits, _mm256_set1_epi64x(inf_bits), over);
    const __m256i zero = _mm256_cmpeq_epi64(w, _mm256_setzero_si256());
    bits = _mm256_andnot_si256(zero, bits);
    // The 64-bit lanes' low halves to 32-bit lanes, the sign (bit 31 of `sign`) to bit 15, then
    // 16-bit lanes.
    const __m128i bits32 = _mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(bits, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
    const __m128i signed32 = _mm_or_si128(bits32, _mm_srli_epi32(sign, 16));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi32(signed32, signed32));
    const __m256i done64 = _mm256_and_si256(
        eligible, _mm256_or_si256(
                      _mm256_and_si256(in_table, _mm256_and_si256(shift_ok, away)), zero));
    const auto done = static_cast<std::uint32_t>(_mm256_movemask_pd(_mm256_castsi256_pd(done64)));
    *inf = done & static_cast<std::uint32_t>(_mm256_movemask_pd(
                      _mm256_castsi256_pd(_mm256_andnot_si256(zero, over))));
    return done;
  }

  // The binary32 or 16-bit rule, for T, into `out` (elements of T).
  template <DType T>
  static std::uint32_t EncodeAny4(__m256i w, const std::int32_t* q, __m256i eligible,
                                  __m128i sign, std::byte* out, std::uint32_t* inf) {
    if constexpr (T == DType::kF32) {
      return EncodeStore4(w, q, eligible, sign, reinterpret_cast<std::uint32_t*>(out), inf);
    } else {
      return EncodeStoreSmall4(w, q, eligible, sign, T == DType::kF16 ? 11 : 8,
                               T == DType::kF16 ? 15 : 127, reinterpret_cast<std::uint16_t*>(out),
                               inf);
    }
  }

  static constexpr bool kSmallTypes = true;

  static constexpr bool kShortTokens = true;

  // Eight tokens as two groups of four: scan4(tokens, out, &inf) for each, their done and
  // overflow masks joined.
  template <DType T, class Scan4>
  static std::uint32_t TwoFours(const char* const* tok, std::byte* out, std::uint32_t* inf,
                                Scan4 scan4) {
    constexpr std::size_t kSize = T == DType::kF32 ? 4 : 2;
    std::uint32_t inf_lo;
    std::uint32_t inf_hi;
    const std::uint32_t done =
        scan4(tok, out, &inf_lo) | (scan4(tok + 4, out + 4 * kSize, &inf_hi) << 4);
    *inf = inf_lo | (inf_hi << 4);
    return done;
  }

  // Avx512Isa::ScanEncodeShort8 with two tokens per register (one per 128-bit lane), as two
  // groups of four. (Never an overflow in f32: these values are below 10^16.)
  template <DType T>
  static std::uint32_t ScanEncodeShort8(const char* const* tok, std::byte* out,
                                        std::uint32_t* inf) {
    return TwoFours<T>(tok, out, inf, ScanEncodeShort4<T>);
  }

  template <DType T>
  static std::uint32_t ScanEncodeShort4(const char* const* tok, std::byte* out,
                                        std::uint32_t* inf) {
    std::int32_t frac_digits[4];
    std::uint64_t good[4];      // all ones where the token has the shape
    std::uint32_t negative[4];  // sign bits
    __m256i w2[2];
    const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0,
                                          1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // The byte of a packed qword (copied to both lanes) each lane reads: its shift, its split.
    const __m256i lane_shift =
        _mm256_setr_epi32(0, 0, 0, 0, 0x01010101, 0x01010101, 0x01010101, 0x01010101);
    const __m256i lane_split = _mm256_add_epi8(lane_shift, _mm256_set1_epi8(4));
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      const char* const* t = tok + 2 * g;
      const __m256i v = Load2x16(t[0], t[1]);
      const __m256i raw = _mm256_sub_epi8(v, _mm256_set1_epi8('0'));
      // Unsigned raw <= 9: the digits.
      const __m256i is_digit = _mm256_cmpeq_epi8(_mm256_min_epu8(raw, _mm256_set1_epi8(9)), raw);
      const __m256i digits = _mm256_and_si256(raw, is_digit);
      const auto dg = static_cast<std::uint32_t>(_mm256_movemask_epi8(is_digit));
      const auto dot = static_cast<std::uint32_t>(
          _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('.'))));
      const auto end = static_cast<std::uint32_t>(_mm256_movemask_epi8(
          _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(' ')),
                                          _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\t'))),
                          _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')),
                                          _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r'))))));
      std::uint64_t shifts = 0;
      std::uint64_t splits = 0;
#pragma GCC unroll 2
      for (int i = 0; i < 2; ++i) {
        const int k = 2 * g + i;
        std::uint32_t shift;
        std::uint32_t split;
        const bool ok =
            CheckShortToken(t[i], (dg >> (16 * i)) & 0xffffu, (dot >> (16 * i)) & 0xffffu,
                            (end >> (16 * i)) & 0xffffu, &frac_digits[k], &shift, &split);
        shifts |= static_cast<std::uint64_t>(shift & 0xff) << (8 * i);
        splits |= static_cast<std::uint64_t>(split & 0xff) << (8 * i);
        good[k] = ok ? ~std::uint64_t{0} : 0;
        negative[k] = t[i][0] == '-' ? 0x80000000u : 0u;
      }
      const __m256i packed = _mm256_broadcastsi128_si256(
          _mm_cvtsi64_si128(static_cast<long long>(shifts | (splits << 32))));
      const __m256i shift_v = _mm256_shuffle_epi8(packed, lane_shift);
      const __m256i split_v = _mm256_shuffle_epi8(packed, lane_split);
      __m256i index = _mm256_sub_epi8(iota, shift_v);
      // One further left where iota < split (both below 128: a signed compare is right).
      index = _mm256_add_epi8(index, _mm256_cmpgt_epi8(split_v, iota));
      w2[g] = Digits16x2(_mm256_shuffle_epi8(digits, index));
    }
    // Qwords 0 and 2 of each group are the four significands.
    const __m256i w = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(w2[0], w2[1]), 0xd8);
    const std::int32_t q[4] = {-frac_digits[0], -frac_digits[1], -frac_digits[2],
                               -frac_digits[3]};
    const __m256i eligible =
        _mm256_setr_epi64x(static_cast<long long>(good[0]), static_cast<long long>(good[1]),
                           static_cast<long long>(good[2]), static_cast<long long>(good[3]));
    const __m128i sign =
        _mm_setr_epi32(static_cast<int>(negative[0]), static_cast<int>(negative[1]),
                       static_cast<int>(negative[2]), static_cast<int>(negative[3]));
    return EncodeAny4<T>(w, q, eligible, sign, out, inf);
  }

  static constexpr bool kSciTokens = true;

  // Avx512Isa::ScanEncodeSci8 with one token per register, as two groups of four.
  template <DType T>
  static std::uint32_t ScanEncodeSci8(const char* const* tok, std::byte* out, std::uint32_t* inf) {
    return TwoFours<T>(tok, out, inf, ScanEncodeSci4<T>);
  }

  // Four tokens: where all four have the '%.18e' template (AllSci18, simd_isa.h), a class
  // check and fixed offsets; otherwise the general shape analysis of ScanEncodeSciShapes4.
  template <DType T>
  static std::uint32_t ScanEncodeSci4(const char* const* tok, std::byte* out, std::uint32_t* inf) {
    const char* f[4];
    std::uint32_t negative[4];
    if (!AllSci18<4>(tok, f, negative)) return ScanEncodeSciShapes4<T>(tok, out, inf);
    std::uint64_t head[4];
    std::int32_t q[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) Sci18Fields(f[k], &head[k], &q[k]);
    __m256i lo2[2];
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      lo2[g] = Digits16x2(
          _mm256_sub_epi8(Load2x16(f[2 * g] + 4, f[2 * g + 1] + 4), _mm256_set1_epi8('0')));
    }
    const __m256i lo = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(lo2[0], lo2[1]), 0xd8);
    const __m256i w = _mm256_add_epi64(
        _mm256_setr_epi64x(static_cast<long long>(head[0]), static_cast<long long>(head[1]),
                           static_cast<long long>(head[2]), static_cast<long long>(head[3])),
        lo);
    return EncodeAny4<T>(
        w, q, _mm256_set1_epi64x(-1),
        _mm_setr_epi32(static_cast<int>(negative[0]), static_cast<int>(negative[1]),
                       static_cast<int>(negative[2]), static_cast<int>(negative[3])),
        out, inf);
  }

  // ScanEncodeSci4 for any token shape: CheckSciShape on each token's byte masks.
  template <DType T>
  static std::uint32_t ScanEncodeSciShapes4(const char* const* tok, std::byte* out,
                                            std::uint32_t* inf) {
    std::uint64_t head[4];
    std::int32_t q[4];
    const char* tail[4];
    std::uint64_t good[4];
    std::uint32_t negative[4];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const char* s = tok[k];
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
      const __m256i raw = _mm256_sub_epi8(v, _mm256_set1_epi8('0'));
      const std::uint64_t d = static_cast<std::uint32_t>(
          _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_min_epu8(raw, _mm256_set1_epi8(9)), raw)));
      const std::uint64_t pt = static_cast<std::uint32_t>(
          _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('.'))));
      const std::uint64_t e = static_cast<std::uint32_t>(_mm256_movemask_epi8(
          _mm256_cmpeq_epi8(_mm256_or_si256(v, _mm256_set1_epi8(0x20)), _mm256_set1_epi8('e'))));
      const std::uint64_t sn = static_cast<std::uint32_t>(
          _mm256_movemask_epi8(_mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('-')),
                                               _mm256_cmpeq_epi8(v, _mm256_set1_epi8('+')))));
      std::uint64_t stop = static_cast<std::uint32_t>(_mm256_movemask_epi8(_mm256_or_si256(
                               _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(' ')),
                                               _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\t'))),
                               _mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')),
                                               _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r')))))) |
                           (std::uint64_t{1} << 32);
      const SciShape sh = CheckSciShape(s, d, pt, e, sn, stop);
      head[k] = sh.head;
      q[k] = sh.q;
      tail[k] = sh.ok ? s + sh.exp_pos - 16 : s;
      good[k] = sh.ok ? ~std::uint64_t{0} : 0;
      negative[k] = sh.negative ? 0x80000000u : 0u;
    }
    __m256i lo2[2];
#pragma GCC unroll 2
    for (int g = 0; g < 2; ++g) {
      lo2[g] = Digits16x2(
          _mm256_sub_epi8(Load2x16(tail[2 * g], tail[2 * g + 1]), _mm256_set1_epi8('0')));
    }
    const __m256i lo = _mm256_permute4x64_epi64(_mm256_unpacklo_epi64(lo2[0], lo2[1]), 0xd8);
    // w = head (already times 10^16) + the last 16 digits.
    const __m256i w = _mm256_add_epi64(
        _mm256_setr_epi64x(static_cast<long long>(head[0]), static_cast<long long>(head[1]),
                           static_cast<long long>(head[2]), static_cast<long long>(head[3])),
        lo);
    return EncodeAny4<T>(
        w, q,
        _mm256_setr_epi64x(static_cast<long long>(good[0]), static_cast<long long>(good[1]),
                           static_cast<long long>(good[2]), static_cast<long long>(good[3])),
        _mm_setr_epi32(static_cast<int>(negative[0]), static_cast<int>(negative[1]),
                       static_cast<int>(negative[2]), static_cast<int>(negative[3])),
        out, inf);
  }
};

}  // namespace

void ParseChunkAvx2(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<Avx2Isa>(text, params, out);
}

}  // namespace embstore::convert
