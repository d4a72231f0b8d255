// The SIMD primitives of the chunk parser, written once over an xsimd architecture (private).
// Included only by parse_avx2.cc, parse_avx512.cc (x86-64) and parse_neon.cc (aarch64), which are
// compiled for those ISAs and supply ToMask() for their architecture (parse_neon.cc also its own
// Digits16 and a wider DigitMask).
#ifndef EMBSTORE_CONVERT_SRC_SIMD_ISA_H_
#define EMBSTORE_CONVERT_SRC_SIMD_ISA_H_

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "parse_impl.h"

namespace embstore::convert {
namespace {

// Mask is uint32_t or uint64_t: bit i describes byte i of the block.
template <class Arch, class Mask>
Mask ToMask(const xsimd::batch_bool<std::int8_t, Arch>& b);

// Arch: the blocks FindAny scans (long searches: to the end of a line, of a key). DigitArch: the
// block that classifies one number token; tokens are short, so a 32-byte block is enough and,
// on AMD Zen 4, a movemask from a ymm register has lower latency than a mask register move.
template <class Arch, class DigitArch = Arch>
struct SimdIsa {
  using Batch = xsimd::batch<std::int8_t, Arch>;
  using DigitBatch = xsimd::batch<std::int8_t, DigitArch>;
  static constexpr int kScanWidth = static_cast<int>(Batch::size);
  static constexpr int kWidth = static_cast<int>(DigitBatch::size);
  static constexpr bool kSimd = true;
  static constexpr bool kBatchF32 = false;
  static constexpr bool kShortTokens = false;
  static constexpr bool kSciTokens = false;
  static constexpr bool kSmallTypes = false;
  using ScanMask = std::conditional_t<kScanWidth == 64, std::uint64_t, std::uint32_t>;
  using Mask = std::conditional_t<kWidth == 64, std::uint64_t, std::uint32_t>;

  static Batch Load(const char* p) {
    return Batch::load_unaligned(reinterpret_cast<const std::int8_t*>(p));
  }

  // Scalar meaning: bit i = ('0' <= p[i] && p[i] <= '9'). In signed bytes, p[i] - '0' lies in
  // [0, 9] exactly for the ten digits (every other byte value wraps outside that range).
  static Mask DigitMask(const char* p) {
    DigitBatch d = DigitBatch::load_unaligned(reinterpret_cast<const std::int8_t*>(p)) -
                   DigitBatch(static_cast<std::int8_t>('0'));
    return ToMask<DigitArch, Mask>((d > DigitBatch(static_cast<std::int8_t>(-1))) &
                                   (d < DigitBatch(static_cast<std::int8_t>(10))));
  }

  // The two masks of one scan block that the row fast path needs. Scalar meaning, for byte i of
  // the block at p: bit i of *blank = (p[i] == ' ' || p[i] == '\t'); bit i of *brk =
  // (p[i] == '\n' || p[i] == '\r' || p[i] == other).
  static void RowMasks(const char* p, char other, ScanMask* blank, ScanMask* brk) {
    const Batch v = Load(p);
    *blank = ToMask<Arch, ScanMask>((v == Batch(' ')) | (v == Batch('\t')));
    *brk = ToMask<Arch, ScanMask>((v == Batch('\n')) | (v == Batch('\r')) | (v == Batch(other)));
  }

#if defined(__x86_64__)
  static int Ctz(ScanMask m) {
    if constexpr (kScanWidth == 64) {
      return static_cast<int>(_tzcnt_u64(m));
    } else {
      return static_cast<int>(_tzcnt_u32(m));
    }
  }
  static ScanMask LowBits(int k) {
    return static_cast<ScanMask>(_bzhi_u64(~std::uint64_t{0}, static_cast<unsigned>(k)));
  }
#else
  // The same meaning as TZCNT and BZHI: Ctz(0) is the mask's width, LowBits(k >= 64) all ones.
  static int Ctz(ScanMask m) {
    return m == 0 ? static_cast<int>(8 * sizeof(ScanMask)) : __builtin_ctzll(m);
  }
  static ScanMask LowBits(int k) {
    return static_cast<ScanMask>(k >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << k) - 1);
  }
#endif

  // Scalar meaning: the first q in [p, end) with *q in set.c[0..5], else end. Whole blocks are
  // loaded while they stay inside the readable range; the rest goes byte by byte.
  static const char* FindAny(const char* p, const char* end, const char* re, const CharSet& set) {
    const Batch c0(set.c[0]), c1(set.c[1]), c2(set.c[2]), c3(set.c[3]), c4(set.c[4]), c5(set.c[5]);
    while (p < end && re - p >= kScanWidth) {
      Batch v = Load(p);
      ScanMask m = ToMask<Arch, ScanMask>((v == c0) | (v == c1) | (v == c2) | (v == c3) |
                                          (v == c4) | (v == c5));
      if (m != 0) {
        const char* hit = p + __builtin_ctzll(m);
        return hit < end ? hit : end;
      }
      p += kScanWidth;
    }
    return set.FindIn(p, end);
  }

#if defined(__x86_64__)
  // Value of the n (1..16) ASCII digits that end at `last`. Scalar meaning: the loop
  // v = v * 10 + digit over [last - n, last).
  // One 16-byte load ending at `last` right-aligns the digits; lanes before them are zeroed, so
  // the lanes hold the 16-digit number 0...0d1...dn. Then adjacent lanes combine pairwise:
  // bytes -> 2-digit u16 (maddubs, weights 10,1), -> 4-digit u32 (madd, 100,1), -> packed u16,
  // -> 8-digit u32 (madd, 10000,1); the two 8-digit halves give hi * 10^8 + lo.
  // (xsimd 8.1 has no horizontal multiply-add, hence the SSE intrinsics on its registers.)
  static std::uint64_t Digits16(const char* last, int n) {
    using Narrow = xsimd::batch<std::int8_t, xsimd::sse4_2>;
    Narrow v = Narrow::load_unaligned(reinterpret_cast<const std::int8_t*>(last - 16)) -
               Narrow(static_cast<std::int8_t>('0'));
    alignas(16) static constexpr std::int8_t kLane[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                          8, 9, 10, 11, 12, 13, 14, 15};
    const Narrow lane = Narrow::load_aligned(kLane);
    v = xsimd::select(lane >= Narrow(static_cast<std::int8_t>(16 - n)), v, Narrow(0));
    const __m128i w10 = _mm_setr_epi8(10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1, 10, 1);
    const __m128i w100 = _mm_setr_epi16(100, 1, 100, 1, 100, 1, 100, 1);
    const __m128i w10000 = _mm_setr_epi16(10000, 1, 10000, 1, 10000, 1, 10000, 1);
    __m128i t = _mm_maddubs_epi16(v, w10);
    t = _mm_madd_epi16(t, w100);
    t = _mm_packus_epi32(t, t);
    t = _mm_madd_epi16(t, w10000);
    auto hi = static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm_cvtsi128_si32(t)));
    auto lo = static_cast<std::uint64_t>(static_cast<std::uint32_t>(_mm_extract_epi32(t, 1)));
    return hi * 100000000ull + lo;
  }
#endif
};

#if defined(__x86_64__)
// The per-token halves of the kernels' eight-token paths (parse_avx2.cc,
// parse_avx512.cc): plain bit operations on one token's byte-class masks, the same for every
// instruction set.

// A short token: [+-]digits[.digits] followed by a blank or line break within 16 bytes. The
// masks cover the 16 bytes at s: d digits, pt points, end blanks and line breaks. Returns
// whether s has that shape, and sets its fraction digits and the two bytes that define its
// byte shuffle: *shift = 16 - its length (the offset that right-aligns it), *split = the first
// shuffle byte whose source is past the point (0: no point).
[[gnu::always_inline]] inline bool CheckShortToken(const char* s, std::uint32_t d, std::uint32_t pt,
                                                   std::uint32_t end, std::int32_t* frac_digits,
                                                   std::uint32_t* shift, std::uint32_t* split) {
  const std::uint32_t len = _tzcnt_u32(end | 0x10000u);
  const std::uint32_t body = (1u << len) - 1;
  const auto sign = static_cast<std::uint32_t>((s[0] == '-') | (s[0] == '+'));
  const std::uint32_t dm = d & body;
  const std::uint32_t pm = pt & body;
  // Digits after the point: above its bit (none when there is no point).
  *frac_digits = __builtin_popcount(dm & ~(2 * pm - 1));
  *shift = 16 - len;
  *split = pm != 0 ? _tzcnt_u32(pm) + 1 + *shift : 0;
  return len < 16 && (dm | pm | sign) == body && dm != 0 && (pm & (pm - 1)) == 0;
}

// A scientific-notation token: [+-]D.D{16,18}[eE][+-]D{1,3}, ending within 32 bytes. Masks
// cover the 32 bytes at s: d digits, pt points, e 'e' or 'E', sn signs, stop blanks and line
// breaks (bit 32 set too).
struct SciShape {
  bool ok;
  bool negative;
  std::uint32_t exp_pos;  // offset of the 'e'; the 16 bytes before it are the last digits
  std::uint64_t head;     // the digits before those 16, times 10^16
  std::int32_t q;         // decimal exponent of the whole significand
};

[[gnu::always_inline]] inline SciShape CheckSciShape(const char* s, std::uint64_t d,
                                                     std::uint64_t pt, std::uint64_t e,
                                                     std::uint64_t sn, std::uint64_t stop) {
  const auto len = static_cast<std::uint32_t>(_tzcnt_u64(stop));  // <= 32
  const auto lead = static_cast<std::uint32_t>(sn & 1);           // a sign before the digits
  const auto nf = static_cast<std::uint32_t>(_tzcnt_u64(~(d >> (lead + 2))));
  const std::uint32_t epos = lead + 2 + nf;                            // the 'e', <= 35
  const auto xs = static_cast<std::uint32_t>((sn >> (epos + 1)) & 1);  // exponent sign
  const std::uint32_t xd = epos + 1 + xs;                              // first exponent digit
  const std::uint32_t ne = len - xd;  // exponent digits (wraps when len < xd)
  const std::uint64_t body = _bzhi_u64(~std::uint64_t{0}, len);
  const std::uint64_t want_digits = (std::uint64_t{1} << lead) |
                                    (_bzhi_u64(~std::uint64_t{0}, nf) << (lead + 2)) |
                                    (_bzhi_u64(~std::uint64_t{0}, ne) << xd);
  SciShape r;
  r.ok = (len < 32) & (nf - 16 <= 2) & (ne - 1 <= 2) & ((d & body) == want_digits) &
         ((pt & body) == (std::uint64_t{1} << (lead + 1))) &
         ((e & body) == (std::uint64_t{1} << epos)) &
         ((sn & body) == (lead | (std::uint64_t{xs} << (epos + 1))));
  r.negative = lead != 0 && s[0] == '-';
  r.exp_pos = epos;
  // Leading digits: the one before the point and the fraction digits before the last 16.
  const char* f = s + lead;
  const auto a = static_cast<std::uint64_t>(f[0] - '0');
  const auto b = static_cast<std::uint64_t>(f[2] - '0');
  const auto c = static_cast<std::uint64_t>(f[3] - '0');
  r.head = (nf == 16 ? a : nf == 17 ? a * 10 + b : a * 100 + b * 10 + c) * 10000000000000000ull;
  const char* x = s + xd;
  const int x0 = x[0] - '0';
  const int x1 = x[1] - '0';
  const int x2 = x[2] - '0';
  const int xv = ne == 1 ? x0 : ne == 2 ? x0 * 10 + x1 : x0 * 100 + x1 * 10 + x2;
  const bool xneg = xs != 0 && s[epos + 1] == '-';
  r.q = (xneg ? -xv : xv) - static_cast<int>(nf);
  return r;
}

// np.savetxt's '%.18e' exactly: [+-]D.D{18}[eE][+-]DD then a blank or line break, a special
// case of CheckSciShape's shape that files of that format hold in nearly every token. Checking
// it is a byte-class compare against a template, and its fields sit at fixed offsets; the
// kernels take that path for a group of tokens when all of them match (perf on AMD Zen 4 showed
// CheckSciShape's mask arithmetic as most of the '%.18e' time).
//
// Byte classes, one bit each: the class of byte c is kLo[c & 15] & kHi[c >> 4] (two shuffles).
// Every class bit means exactly its bytes: digit, '.', 'e' or 'E', '+' or '-', ' ', and '\t'
// '\n' '\r'. (')' = 0x29 meets a blank's high nibble and a tab's low one, but they carry
// different bits.)
enum : std::uint8_t { kClassDig = 1, kClassDot = 2, kClassExp = 4, kClassSgn = 8, kClassSp = 16,
                      kClassCtl = 32 };

// Bit i set where byte i of the 25 at f breaks the template that follows any leading sign,
// D.D{18}[eE][+-]DD and a blank or line break: zero when f has that shape. 32 bytes are read.
[[gnu::always_inline]] inline std::uint32_t Sci18Misses(const char* f) {
  constexpr std::uint8_t D = kClassDig;
  const __m256i lo = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(D | kClassSp, D, D, D, D, D | kClassExp, D, D, D, D | kClassCtl, kClassCtl,
                    kClassSgn, 0, kClassSgn | kClassCtl, kClassDot, 0));
  const __m256i hi = _mm256_broadcastsi128_si256(_mm_setr_epi8(
      kClassCtl, 0, kClassDot | kClassSgn | kClassSp, D, kClassExp, 0, kClassExp, 0, 0, 0, 0, 0,
      0, 0, 0, 0));
  const __m256i allowed =
      _mm256_setr_epi8(D, kClassDot, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D, D,
                       kClassExp, kClassSgn, D, D, kClassSp | kClassCtl, 0, 0, 0, 0, 0, 0, 0);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(f));
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i cls =
      _mm256_and_si256(_mm256_shuffle_epi8(lo, _mm256_and_si256(v, nibble)),
                       _mm256_shuffle_epi8(hi, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)));
  return static_cast<std::uint32_t>(_mm256_movemask_epi8(
             _mm256_cmpeq_epi8(_mm256_and_si256(cls, allowed), _mm256_setzero_si256()))) &
         0x1ffffffu;
}

// Whether all N tokens have the '%.18e' template; sets f[k] to token k after any leading sign
// and negative[k] to its sign bit (0x80000000 for '-').
template <int N>
[[gnu::always_inline]] inline bool AllSci18(const char* const* tok, const char** f,
                                            std::uint32_t* negative) {
  std::uint32_t misses = 0;
#pragma GCC unroll 8
  for (int k = 0; k < N; ++k) {
    const char c = tok[k][0];
    negative[k] = c == '-' ? 0x80000000u : 0u;
    f[k] = tok[k] + ((c == '-') | (c == '+'));
    misses |= Sci18Misses(f[k]);
  }
  return misses == 0;
}

// The fields of a template token at f (after its sign), as CheckSciShape gives them: the three
// digits before the last 16 (D.DD), times 10^16, and the exponent of the 19-digit significand.
// The last 16 digits are the 16 bytes at f + 4.
[[gnu::always_inline]] inline void Sci18Fields(const char* f, std::uint64_t* head,
                                               std::int32_t* q) {
  const auto* b = reinterpret_cast<const unsigned char*>(f);
  *head = (b[0] * 100u + b[2] * 10u + b[3] - 111u * '0') * 10000000000000000ull;
  const int x = b[22] * 10 + b[23] - 11 * '0';
  // The template has '+' (0x2b) or '-' (0x2d) at b[21]: 0x2c - b[21] is its sign as +1 or -1.
  // A multiply, not a branch: the exponent's sign is as random as the data (a compare and jump
  // here, mispredicted for about a third of all tokens, cost the kernel some 10 % on text it
  // had not seen before).
  *q = x * (0x2c - b[21]) - 18;
}

#endif  // __x86_64__

}  // namespace
}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_SIMD_ISA_H_
