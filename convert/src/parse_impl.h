// The chunk-parsing algorithm, written once and compiled per instruction set (parse_*.cc).
//
// Include this only from a parse_<isa>.cc file, after defining the Isa policy. Everything here has
// internal linkage and calls no inline library template that another translation unit could also
// emit: the linker would otherwise be free to keep the copy compiled with AVX-512 flags and run it
// on a CPU without AVX-512. Growing the output vectors goes through kernel_common.cc instead.
//
// The Isa policy provides:
//   kSimd                      false for the scalar reference
//   kBatchF32                  whether FastRow runs (see below)
//   FindAny(p, end, re, set)   first byte in [p, end) that is one of set.c[0..5] (or end); may
//                              read up to `re`
// and, when kSimd:
//   kWidth, Mask               bytes per block and the bitmask type for a block
//   DigitMask(p)               bit i set when p[i] is an ASCII digit, i < kWidth
//   Digits16(last, n)          value of the n <= 16 ASCII digits ending at `last`; reads the 16
//                              bytes before `last`
//   kScanWidth, ScanMask       bytes per scan block and its bitmask type
//   RowMasks(p, other, &blank, &brk)  masks of the scan block at p: blanks (' ', '\t') and
//                              line-ending bytes ('\n', '\r', `other`)
//   kBatchF32, kBatch          true when EncodeF32Batch exists: kBatch plain decimals to binary32
//                              where the approximate product is provably right (FastF32's
//                              rule); returns the mask of lanes written, *inf those that overflowed
//   kShortTokens               true when ScanEncodeShort8<dtype>(tok, out, &inf) exists: scans
//                              and encodes the eight tokens at tok[0..8) of a row that ends with
//                              a line break, each where it is [+-]digits[.digits] followed by a
//                              blank or line break within 16 bytes (16 bytes at each are
//                              readable); returns the mask of values written to out (dtype
//                              elements), *inf marks overflows
//   kSciTokens                 true when ScanEncodeSci8<dtype>(tok, out, &inf) exists: the same
//                              for [+-]D.D{16,18}[eE][+-]D{1,3} within 32 bytes (64 bytes past
//                              the line break are readable)
//   kSmallTypes                true when those two also encode f16 and bf16 (else f32 only)
//   Ctz(m), LowBits(k)         index of the lowest set bit (the width when m == 0); the mask of
//                              the low k bits, 0 <= k <= the width
#ifndef EMBSTORE_CONVERT_SRC_PARSE_IMPL_H_
#define EMBSTORE_CONVERT_SRC_PARSE_IMPL_H_

#include <fast_float/fast_float.h>

#include <cstdint>
#include <cstring>

#include "embstore/convert/parse_kernels.h"
#include "kernel_common.h"
#include "decimal.h"
#include "embstore/store/format.h"

namespace embstore::convert {
namespace {

struct CharSet {
  char c[6];

  // The first byte of [p, end) in the set, or end: the scalar scan, and the SIMD scans' tail.
  const char* FindIn(const char* p, const char* end) const {
    for (; p < end; ++p) {
      const char x = *p;
      if (x == c[0] || x == c[1] || x == c[2] || x == c[3] || x == c[4] || x == c[5]) return p;
    }
    return end;
  }
};

inline bool IsDigitChar(char c) { return static_cast<unsigned char>(c - '0') < 10; }

constexpr std::uint64_t kPow10U64[] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};

// Fast encoders for the common case (finite, at most 19 digits), inlined into the SIMD kernels.
// They return false whenever the answer needs care (a value too close to a halfway point of the
// target type, subnormal doubles, Eisel-Lemire giving up); the out-of-line Encode*() then
// decides, so results are identical to the scalar kernel's (parse_kernel_test.cc).

// Powers of ten from 1e-64 to 1e64, each the double nearest to it (the compiler rounds decimal
// literals correctly), for the approximate products below.
constexpr int kApproxPow10Min = -64;
constexpr int kApproxPow10Max = 64;
constexpr double kExactPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                  1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
constexpr double kApproxPow10[] = {
    1e-64, 1e-63, 1e-62, 1e-61, 1e-60, 1e-59, 1e-58, 1e-57, 1e-56, 1e-55, 1e-54, 1e-53, 1e-52,
    1e-51, 1e-50, 1e-49, 1e-48, 1e-47, 1e-46, 1e-45, 1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39,
    1e-38, 1e-37, 1e-36, 1e-35, 1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26,
    1e-25, 1e-24, 1e-23, 1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13,
    1e-12, 1e-11, 1e-10, 1e-9,  1e-8,  1e-7,  1e-6,  1e-5,  1e-4,  1e-3,  1e-2,  1e-1,  1e0,
    1e1,   1e2,   1e3,   1e4,   1e5,   1e6,   1e7,   1e8,   1e9,   1e10,  1e11,  1e12,  1e13,
    1e14,  1e15,  1e16,  1e17,  1e18,  1e19,  1e20,  1e21,  1e22,  1e23,  1e24,  1e25,  1e26,
    1e27,  1e28,  1e29,  1e30,  1e31,  1e32,  1e33,  1e34,  1e35,  1e36,  1e37,  1e38,  1e39,
    1e40,  1e41,  1e42,  1e43,  1e44,  1e45,  1e46,  1e47,  1e48,  1e49,  1e50,  1e51,  1e52,
    1e53,  1e54,  1e55,  1e56,  1e57,  1e58,  1e59,  1e60,  1e61,  1e62,  1e63,  1e64};

// The double nearest to w * 10^q, within 3.01 units in its last place: fl(w) and fl(10^q) are
// each rounded once (relative error <= 2^-53) and so is their product; three such roundings stay
// below 3.01 ulp. Returns false when q is outside the table.
inline bool ApproxDouble(const Decimal& d, double* v) {
  if (d.q < kApproxPow10Min || d.q > kApproxPow10Max) return false;
  *v = static_cast<double>(d.w) * kApproxPow10[d.q - kApproxPow10Min];
  return true;
}

// An approximation within 3.01 ulp rounds to the same narrower value as the exact decimal unless
// a halfway point of the narrower type lies within that distance. `rem` is the approximation's
// dropped bits and `half` their halfway pattern, both in units of the approximation's last place;
// a margin of 8 units covers the error with room to spare. Near the top and bottom of a binade the
// neighbouring binade's halfway points are far away (the powers of two themselves are
// representable), so only this binade's halfway point needs checking.
// One unsigned comparison (|rem - half| > 8, wrapping), so no data-dependent branch: rem is
// random, and a branch on either side of half would mispredict half the time.
inline bool SafelyAwayFromHalfway(std::uint64_t rem, std::uint64_t half) {
  return rem - half + 8 > 16;
}

// Fast binary32 for the common case: a double close to the decimal (Clinger's exact product when
// w and 10^q are exact doubles, else the approximate one) rounded to binary32, whenever that is
// provably the correctly rounded result (see above); otherwise Eisel-Lemire straight to binary32
// (one rounding from the exact decimal w * 10^q).
inline bool FastF32(const Decimal& d, Encoded* out) {
  const std::uint32_t sign = d.negative ? 0x80000000u : 0u;
  if (d.w == 0) {
    *out = Encoded{sign, false};
    return true;
  }
  double v;
  if (d.w <= (std::uint64_t{1} << 53) && d.q >= -22 && d.q <= 22) {
    // Clinger in binary64: w and 10^|q| are exact doubles, so one multiplication or division
    // rounds once; that double is within half an ulp of the decimal.
    v = static_cast<double>(d.w);
    v = d.q < 0 ? v / kExactPow10[-d.q] : v * kExactPow10[d.q];
  } else if (!ApproxDouble(d, &v)) {
    v = 0;  // not available: Eisel-Lemire below
  }
  if (v != 0) {
    std::uint64_t db;
    std::memcpy(&db, &v, 8);
    const std::uint64_t dexp = db >> 52;  // v is positive
    // Binary32 keeps 24 of the double's 53 significand bits: 29 are dropped. Below 2^-126 the
    // binary32 result would be subnormal (fewer bits survive): left to Eisel-Lemire.
    if (dexp > 1023 - 126 && SafelyAwayFromHalfway(db & 0x1fffffffu, 0x10000000u)) {
      const float f = static_cast<float>(v);
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      *out = Encoded{bits | sign, bits == 0x7f800000u};
      return true;
    }
  }
  fast_float::adjusted_mantissa am =
      fast_float::compute_float<fast_float::binary_format<float>>(d.q, d.w);
  if (am.power2 < 0) return false;
  const auto bits =
      static_cast<std::uint32_t>(am.mantissa) | (static_cast<std::uint32_t>(am.power2) << 23);
  *out = Encoded{bits | sign, bits == 0x7f800000u};
  return true;
}

// Eisel-Lemire to binary64, then rounding the 53-bit significand to `precision` bits with
// integer operations (scalar meaning: RoundDoubleToSmall in decimal.cc).
inline bool FastSmall(const Decimal& d, int precision, int bias, Encoded* out) {
  const std::uint32_t sign = d.negative ? 0x8000u : 0u;
  if (d.w == 0) {
    *out = Encoded{sign, false};
    return true;
  }
  fast_float::adjusted_mantissa am =
      fast_float::compute_float<fast_float::binary_format<double>>(d.q, d.w);
  if (am.power2 <= 0 || am.power2 >= 0x7ff) return false;          // failed, subnormal or infinite
  const std::uint64_t m = am.mantissa | (std::uint64_t{1} << 52);  // value = m * 2^(e - 52)
  const int e = am.power2 - 1023;
  const int emin = 1 - bias;
  int shift = 52 - (precision - 1);
  if (e < emin) shift += emin - e;  // the target is subnormal: fewer bits survive
  if (shift > 60) return false;     // far below the smallest subnormal
  std::uint64_t n = m >> shift;
  const std::uint64_t rem = m & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  if (rem == half) return false;  // exactly halfway in binary64: the decimal's side decides
  n += rem > half ? 1 : 0;
  int te = e < emin ? emin : e;
  if (n == (std::uint64_t{1} << precision)) {
    n >>= 1;
    ++te;
  }
  const std::uint32_t inf = ((1u << (15 - (precision - 1))) - 1) << (precision - 1);
  if (te > bias) {
    *out = Encoded{sign | inf, true};
    return true;
  }
  const std::uint64_t hidden = std::uint64_t{1} << (precision - 1);
  std::uint32_t bits;
  if (n < hidden) {
    bits = static_cast<std::uint32_t>(n);
  } else {
    bits = (static_cast<std::uint32_t>(te + bias) << (precision - 1)) |
           static_cast<std::uint32_t>(n - hidden);
  }
  *out = Encoded{sign | bits, false};
  return true;
}

template <class Isa>
class ChunkParser {
 public:
  ChunkParser(const ChunkText& text, const ParseParams& params, ChunkResult* out)
      : begin_(text.begin),
        end_(text.end),
        rb_(text.readable_begin),
        re_(text.readable_end),
        p_(params),
        out_(out),
        keyed_(params.layout == Layout::kKeyed),
        comments_(params.layout == Layout::kMatrix ? params.comments : std::string_view()),
        delim_(params.delimiter),
        value_size_(params.dtype == DType::kF32 ? 4 : 2),
        row_bytes_(static_cast<std::size_t>(params.dim) * value_size_) {
    // Bytes that may end a field: blanks, line breaks, the delimiter, the first comment byte.
    char comment0 = comments_.empty() ? '\n' : comments_[0];
    char d = delim_ != 0 ? delim_ : '\n';
    field_end_ = CharSet{{' ', '\t', '\n', '\r', d, comment0}};
    line_end_ = CharSet{{'\n', '\r', '\n', '\r', '\n', '\r'}};
    delim_end_ = CharSet{{'\n', '\r', d, comment0, d, d}};
  }

  void Run() {
    const char* p = begin_;
    line_ = 0;
    line_begin_ = p;
    while (p < end_) {
      p = SkipBlanks(p);
      if (p == end_) break;
      char c = *p;
      if (c == '\n' || c == '\r') {
        p = ConsumeLineBreak(p);
        continue;
      }
      if (IsCommentAt(p)) {
        p = Isa::FindAny(p, end_, re_, line_end_);
        continue;
      }
      const char* row_end = FastRow(p);
      p = row_end != p ? row_end : ParseRow(p);
      if (p == nullptr) return;  // error recorded
    }
    out_->lines = line_;
  }

 private:
  bool IsBlank(char c) const { return (c == ' ' || c == '\t') && c != delim_; }
  const char* SkipBlanks(const char* p) const {
    while (p < end_ && IsBlank(*p)) ++p;
    return p;
  }
  bool IsLineEnd(const char* p) const { return p == end_ || *p == '\n' || *p == '\r'; }
  bool IsCommentAt(const char* p) const {
    if (comments_.empty() || *p != comments_[0]) return false;
    if (static_cast<std::size_t>(end_ - p) < comments_.size()) return false;
    return std::memcmp(p, comments_.data(), comments_.size()) == 0;
  }
  // May a field end right before p?
  bool EndsField(const char* p) const {
    if (p == end_) return true;
    char c = *p;
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || (delim_ != 0 && c == delim_) ||
           IsCommentAt(p);
  }
  // p is at '\n' or '\r': steps over "\n", "\r\n" or "\r".
  const char* ConsumeLineBreak(const char* p) {
    if (*p == '\r' && p + 1 < end_ && p[1] == '\n') ++p;
    ++p;
    ++line_;
    line_begin_ = p;
    return p;
  }
  // End of the field starting at p (for error extents and keys).
  const char* FieldEnd(const char* p) const {
    for (;;) {
      p = Isa::FindAny(p, end_, re_, field_end_);
      if (p == end_ || EndsField(p)) return p;
      ++p;  // the first byte of a longer comment marker, alone: part of the field
    }
  }

  // End of a delimited field starting at p, trailing blanks excluded.
  const char* DelimitedFieldEnd(const char* p) const {
    const char* e = p;
    for (;;) {
      e = Isa::FindAny(e, end_, re_, delim_end_);
      if (e == end_ || *e != delim_end_.c[3] || IsCommentAt(e)) break;
      ++e;  // the first byte of a longer comment marker, alone: part of the field
    }
    while (e > p && IsBlank(e[-1])) --e;
    return e;
  }

  const char* Fail(ErrorKind kind, const char* at, std::size_t length, std::uint64_t found = 0) {
    ChunkError& e = out_->error;
    e.kind = kind;
    e.line = line_;
    e.line_begin = static_cast<std::size_t>(line_begin_ - begin_);
    e.offset = static_cast<std::size_t>(at - begin_);
    e.length = length;
    e.found = found;
    TruncateRows(out_, out_->rows, row_bytes_);
    return nullptr;
  }

  // Counts the values left on the line from p (for a "too many values" message).
  std::uint64_t CountRemainingFields(const char* p) const {
    std::uint64_t n = 0;
    for (;;) {
      p = SkipBlanks(p);
      if (IsLineEnd(p) || IsCommentAt(p)) return n;
      ++n;
      p = FieldEnd(p);
      if (delim_ != 0) {
        p = SkipBlanks(p);
        if (p < end_ && *p == delim_) ++p;
      }
    }
  }

  // Parses the row starting at p (first non-blank byte of the line); returns the position of the
  // line break that ends it (or end_), or nullptr after recording an error.
  const char* ParseRow(const char* p) {
    const char* key = nullptr;
    std::size_t key_len = 0;
    if (keyed_) {
      key = p;
      p = FieldEnd(p);
      key_len = static_cast<std::size_t>(p - key);
      if (key_len > kMaxKeyBytes) return Fail(ErrorKind::kKeyTooLong, key, key_len);
      std::size_t bad = 0;
      if (!ValidUtf8(std::string_view(key, key_len), &bad)) {
        return Fail(ErrorKind::kBadKeyUtf8, key + bad, 1);
      }
    }
    std::byte* dst = AppendRow(out_, row_bytes_);
    const std::uint32_t dim = p_.dim;
    for (std::uint32_t j = 0; j < dim; ++j) {
      if (j > 0 || keyed_) {
        // Separator before the value.
        if (delim_ == 0) {
          const char* q = SkipBlanks(p);
          if (IsLineEnd(q) || IsCommentAt(q)) return Fail(ErrorKind::kTooFewValues, q, 0, j);
          p = q;
        } else {
          p = SkipBlanks(p);
          if (IsLineEnd(p) || IsCommentAt(p)) return Fail(ErrorKind::kTooFewValues, p, 0, j);
          // The number parser stops only where a field may end, so this is the delimiter.
          ++p;
          p = SkipBlanks(p);
          if (IsLineEnd(p) || IsCommentAt(p) || *p == delim_) {
            return Fail(ErrorKind::kEmptyField, p, 0, j);
          }
        }
      } else if (delim_ != 0 && *p == delim_) {
        return Fail(ErrorKind::kEmptyField, p, 0, 0);
      }
      Decimal dec;
      const char* q = Scan(p, &dec);
      bool ok = q != nullptr && EndsField(q);
      if (ok && delim_ != 0) {
        // Fields are trimmed: only blanks may follow the number inside its field.
        const char* r = SkipBlanks(q);
        ok = IsLineEnd(r) || *r == delim_ || IsCommentAt(r);
      }
      if (!ok) {
        const char* fe = delim_ != 0 ? DelimitedFieldEnd(p) : FieldEnd(p);
        return Fail(ErrorKind::kBadNumber, p, static_cast<std::size_t>(fe - p));
      }
      const Encoded enc = EncodeToken(dec, p, q);
      if (enc.overflow && p_.overflow_is_error) {
        return Fail(ErrorKind::kOverflow, p, static_cast<std::size_t>(q - p));
      }
      if (value_size_ == 4) {
        std::memcpy(dst, &enc.bits, 4);  // little-endian host
        dst += 4;
      } else {
        auto h = static_cast<std::uint16_t>(enc.bits);
        std::memcpy(dst, &h, 2);
        dst += 2;
      }
      p = q;
    }
    p = SkipBlanks(p);
    if (!IsLineEnd(p)) {
      if (IsCommentAt(p)) {
        p = Isa::FindAny(p, end_, re_, line_end_);
      } else {
        // In delimiter mode p is at the delimiter before the extra field.
        const char* extra = delim_ != 0 ? SkipBlanks(p + 1) : p;
        std::uint64_t more = CountRemainingFields(extra);
        return Fail(ErrorKind::kTooManyValues, extra, 0, dim + (more == 0 ? 1 : more));
      }
    }
    ++out_->rows;
    if (keyed_) PushKey(out_, key, key_len, static_cast<std::uint32_t>(line_));
    return p;
  }

  // The fast path for one row of blank-separated text (SIMD kernels with a batch encoder). One
  // pass over the line's blocks finds every token start with bit operations on the blank mask;
  // then short or scientific tokens are scanned and encoded eight at a time (ShortRow, SciRow;
  // binary32, and the 16-bit types where Isa::kSmallTypes), or, for binary32 rows of other
  // shapes, a second pass scans every token to its decimal, independently of the others, and a
  // third encodes the decimals kBatch at a time. Each token's chain of dependent instructions is
  // then short, so many are in flight at once. (For the scalar reference, and 16-bit rows of
  // other shapes, the one-pass ParseRow is as fast.) A row that is not plainly the expected
  // tokens (a comment, a lone CR, a wrong count, a bad or overflowing number, a key ParseRow
  // would reject, the buffer's edge, a very long row) is declined: FastRow returns p and leaves
  // no trace, and ParseRow redoes the row and reports any error. Otherwise it returns the
  // position of the line break ending the row (or end_), having emitted exactly what ParseRow
  // would have.
  const char* FastRow(const char* p) {
    if constexpr (!Isa::kBatchF32) {
      return p;
    } else {
      using ScanMask = typename Isa::ScanMask;
      constexpr int kW = Isa::kScanWidth;
      const std::uint32_t want = p_.dim + (keyed_ ? 1u : 0u);
      const bool f32 = p_.dtype == DType::kF32;
      if (delim_ != 0 || want > kMaxFastTokens || (!f32 && !Isa::kSmallTypes)) return p;
      const char other = comments_.empty() ? '\r' : comments_[0];
      std::uint32_t n = 0;
      ScanMask carry = 1;  // p starts a token: the byte before it counts as a blank
      const char* b = p;
      const char* line_end;
      for (;;) {
        if (re_ - b <= kW) return p;  // the block (and a CR's successor) must be readable
        ScanMask blank, brk;
        Isa::RowMasks(b, other, &blank, &brk);
        const std::ptrdiff_t left = end_ - b;
        const int lim = left < kW ? static_cast<int>(left) : kW;
        brk &= Isa::LowBits(lim);
        int stop = lim;  // bytes of this block inside the row
        if (brk != 0) {
          stop = static_cast<int>(Isa::Ctz(brk));
          const char c = b[stop];
          if (c != '\n' && !(c == '\r' && b[stop + 1] == '\n')) return p;
        }
        const ScanMask sep = static_cast<ScanMask>(blank | ~Isa::LowBits(stop));
        ScanMask starts = static_cast<ScanMask>(~sep & ((sep << 1) | carry));
        carry = static_cast<ScanMask>(sep >> (kW - 1));
        const auto cnt = static_cast<std::uint32_t>(__builtin_popcountll(starts));
        if (n + cnt > want) return p;
        // Eight positions unconditionally (the array has room), more only for dense blocks:
        // the loop's trip count then rarely depends on the data.
        const char** out = starts_ + n;
        for (int i = 0; i < 8; ++i) {
          out[i] = b + Isa::Ctz(starts);
          starts = static_cast<ScanMask>(starts & (starts - 1));
        }
        for (std::uint32_t i = 8; i < cnt; ++i) {
          out[i] = b + Isa::Ctz(starts);
          starts = static_cast<ScanMask>(starts & (starts - 1));
        }
        n += cnt;
        if (stop < kW) {
          line_end = b + stop;
          break;
        }
        b += kW;
      }
      if (n != want) return p;
      const char* key = nullptr;
      std::size_t key_len = 0;
      if (keyed_) {
        key = starts_[0];
        key_len = static_cast<std::size_t>(FieldEnd(key) - key);
        std::size_t bad = 0;
        if (key_len > kMaxKeyBytes || !ValidUtf8(std::string_view(key, key_len), &bad)) return p;
      }
      const char* const* tok = starts_ + (keyed_ ? 1 : 0);
      const std::uint32_t dim = p_.dim;
      // The eight-token paths need a line break after the row (every token is then followed by
      // a blank or that break: no bounds check per token) and room to load at any token.
      const bool broken = line_end != end_;
      if constexpr (Isa::kShortTokens) {
        // Short tokens on average (np.savetxt's '%.8g' and the like).
        if (broken && re_ - line_end >= 16 &&
            line_end - tok[0] <= 14 * static_cast<std::ptrdiff_t>(dim)) {
          if (f32) return ShortRow<DType::kF32>(p, tok, line_end, key, key_len);
          if constexpr (Isa::kSmallTypes) {
            return p_.dtype == DType::kF16 ? ShortRow<DType::kF16>(p, tok, line_end, key, key_len)
                                           : ShortRow<DType::kBF16>(p, tok, line_end, key, key_len);
          }
        }
      }
      if constexpr (Isa::kSciTokens) {
        if (broken && !sci_misses_ && re_ - line_end >= 64 && dim >= 8) {
          const char* r = nullptr;
          if (f32) {
            r = SciRow<DType::kF32>(p, tok, line_end, key, key_len);
          } else if constexpr (Isa::kSmallTypes) {
            r = p_.dtype == DType::kF16 ? SciRow<DType::kF16>(p, tok, line_end, key, key_len)
                                        : SciRow<DType::kBF16>(p, tok, line_end, key, key_len);
          }
          if (r != nullptr) return r;
        }
      }
      // The general passes below encode binary32 only; 16-bit rows of other shapes go to ParseRow.
      if (!f32) return p;
      // Pass 2: every token to a plain decimal (w, q, sign), or marked for the general encoder.
      for (std::uint32_t j = 0; j < dim; ++j) {
        const char* s = tok[j];
        Decimal dec;
        const char* q = Scan(s, &dec);
        if (q == nullptr || !EndsToken(q, line_end)) return p;
        w_[j] = dec.w;
        q_[j] = static_cast<std::int32_t>(dec.q < -9999 ? -9999 : dec.q > 9999 ? 9999 : dec.q);
        sign_[j] = dec.negative ? 0x80000000u : 0u;
        plain_[j] = static_cast<std::uint8_t>(!dec.truncated && dec.kind == NumberKind::kFinite);
      }
      // Pass 3: encode, kBatch values at a time where the batch rule applies.
      std::byte* dst = AppendRow(out_, row_bytes_);
      auto* const values = reinterpret_cast<std::uint32_t*>(dst);
      constexpr std::uint32_t kB = Isa::kBatch;
      std::uint32_t j = 0;
      for (; j + kB <= dim; j += kB) {
        std::uint32_t inf = 0;
        const std::uint32_t done =
            Isa::EncodeF32Batch(w_ + j, q_ + j, sign_ + j, plain_ + j, values + j, &inf);
        if (inf != 0 && p_.overflow_is_error) return Decline(p);
        for (std::uint32_t left = ~done & ((1u << kB) - 1); left != 0; left &= left - 1) {
          const std::uint32_t k = j + static_cast<std::uint32_t>(__builtin_ctz(left));
          if (!EncodeOne(tok[k], k, values)) return Decline(p);
        }
      }
      for (; j < dim; ++j) {
        if (!EncodeOne(tok[j], j, values)) return Decline(p);
      }
      ++out_->rows;
      if (keyed_) PushKey(out_, key, key_len, static_cast<std::uint32_t>(line_));
      return line_end;
    }
  }

  // FastRow for rows of short tokens: Isa::ScanEncodeShort8 scans and encodes eight tokens at
  // once where they have the plain shape; the others, and the last dim % 8, one at a time.
  // T is the target dtype (a template parameter: a runtime one cost binary32 rows 6-11 %).
  template <DType T>
  const char* ShortRow(const char* p, const char* const* tok, const char* line_end, const char* key,
                       std::size_t key_len) {
    return EightAtATimeRow<T>(p, tok, line_end, key, key_len, false,
                              [](const char* const* t, std::byte* out, std::uint32_t* inf) {
                                return Isa::template ScanEncodeShort8<T>(t, out, inf);
                              });
  }

  // FastRow for rows of scientific-notation tokens: Isa::ScanEncodeSci8 eight at a time, the
  // others one at a time. When the first eight tokens have none of that shape, the row is undone
  // and nullptr returned (the caller takes the general passes), and this chunk stops trying.
  template <DType T>
  const char* SciRow(const char* p, const char* const* tok, const char* line_end, const char* key,
                     std::size_t key_len) {
    const char* r =
        EightAtATimeRow<T>(p, tok, line_end, key, key_len, true,
                           [](const char* const* t, std::byte* out, std::uint32_t* inf) {
                             return Isa::template ScanEncodeSci8<T>(t, out, inf);
                           });
    if (r == nullptr) sci_misses_ = true;
    return r;
  }

  // The row loop of ShortRow and SciRow: scan8(tokens, out, &inf) handles eight tokens and
  // returns the mask of those done; the rest go one at a time. Returns the row's end, p when it
  // is declined, or nullptr (row undone) when `give_up` and the first eight had none done.
  template <DType T, class Scan8>
  const char* EightAtATimeRow(const char* p, const char* const* tok, const char* line_end,
                              const char* key, std::size_t key_len, bool give_up, Scan8 scan8) {
    constexpr std::size_t kSize = T == DType::kF32 ? 4 : 2;
    std::byte* const values = AppendRow(out_, row_bytes_);
    const std::uint32_t dim = p_.dim;
    std::uint32_t j = 0;
    for (; j + 8 <= dim; j += 8) {
      std::uint32_t inf = 0;
      const std::uint32_t done = scan8(tok + j, values + j * kSize, &inf);
      if (give_up && done == 0 && j == 0) {
        TruncateRows(out_, out_->rows, row_bytes_);
        return nullptr;
      }
      if (inf != 0 && p_.overflow_is_error) return Decline(p);
      for (std::uint32_t left = ~done & 0xffu; left != 0; left &= left - 1) {
        const std::uint32_t k = j + static_cast<std::uint32_t>(__builtin_ctz(left));
        if (!ScanEncodeOne<T>(tok[k], line_end, values + k * kSize)) return Decline(p);
      }
    }
    for (; j < dim; ++j) {
      if (!ScanEncodeOne<T>(tok[j], line_end, values + j * kSize)) return Decline(p);
    }
    ++out_->rows;
    if (keyed_) PushKey(out_, key, key_len, static_cast<std::uint32_t>(line_));
    return line_end;
  }

  // One token of a FastRow row scanned and encoded to T at out: false when it is not exactly a
  // number, or overflows and that is an error.
  template <DType T>
  bool ScanEncodeOne(const char* s, const char* line_end, std::byte* out) {
    Decimal dec;
    const char* q = Scan(s, &dec);
    if (q == nullptr || !EndsToken(q, line_end)) return false;
    const Encoded enc = EncodeToken(dec, s, q);
    if (enc.overflow && p_.overflow_is_error) return false;
    if constexpr (T == DType::kF32) {
      std::memcpy(out, &enc.bits, 4);
    } else {
      const auto h = static_cast<std::uint16_t>(enc.bits);
      std::memcpy(out, &h, 2);
    }
    return true;
  }

  // FastRow's encoder for value k (token at s) one at a time, into values[k]: false when it
  // overflows and that is an error (the row is then declined).
  [[gnu::always_inline]] bool EncodeOne(const char* s, std::uint32_t k, std::uint32_t* values) {
    Encoded enc;
    Decimal dec;
    dec.w = w_[k];
    dec.q = q_[k];
    dec.negative = sign_[k] != 0;
    if (plain_[k] == 0 || !FastF32(dec, &enc)) enc = EncodeSlow(s);
    if (enc.overflow && p_.overflow_is_error) return false;
    values[k] = enc.bits;
    return true;
  }

  // EncodeToken for the number token at s, out of line (rare: it rescans the token, whose text
  // the general encoder needs).
  [[gnu::noinline]] Encoded EncodeSlow(const char* s) const {
    Decimal dec;
    const char* q = Scan(s, &dec);
    return EncodeToken(dec, s, q);
  }

  // A FastRow token must be the number and nothing more: it ends at a blank or the line end.
  static bool EndsToken(const char* q, const char* line_end) {
    return q == line_end || *q == ' ' || *q == '\t';
  }

  // Undoes FastRow's row (its values were appended last) and hands the row to ParseRow.
  const char* Decline(const char* p) {
    TruncateRows(out_, out_->rows, row_bytes_);
    return p;
  }

  // The number token [s, q), scanned to `dec`, encoded to the target dtype: the inlined fast
  // encoders, else the exact general one.
  Encoded EncodeToken(const Decimal& dec, const char* s, const char* q) const {
    Encoded enc;
    if (!FastEncode(dec, &enc)) {
      enc = Encode(p_.dtype, dec, std::string_view(s, static_cast<std::size_t>(q - s)));
    }
    return enc;
  }

  bool FastEncode(const Decimal& d, Encoded* out) const {
    if constexpr (Isa::kSimd) {
      if (d.truncated || d.kind != NumberKind::kFinite) return false;
      switch (p_.dtype) {
        case DType::kF32:
          return FastF32(d, out);
        case DType::kF16:
          return FastSmall(d, 11, 15, out);
        case DType::kBF16:
          return FastSmall(d, 8, 127, out);
      }
      return false;
    } else {
      (void)d;
      (void)out;
      return false;  // the reference kernel always takes the plain path
    }
  }

  [[gnu::always_inline]] const char* Scan(const char* p, Decimal* dec) const {
    if constexpr (Isa::kSimd) {
      return ScanSimd(p, dec);
    } else {
      return ScanNumber(p, end_, dec);
    }
  }

  // The SIMD path: one digit-mask load per digit run finds its length; Digits16 converts it.
  // Anything unusual (inf/nan, runs of kWidth digits or more, > 19 digits, too close to the
  // buffer's edges) takes the scalar path, which gives the same Decimal.
  [[gnu::always_inline]] const char* ScanSimd(const char* p, Decimal* dec) const {
    if (re_ - p < 2 * Isa::kWidth + 8 || p - rb_ < 16) return ScanNumber(p, end_, dec);
    // Branch-free sign: random signs would otherwise mispredict half the time.
    const char c0 = *p;
    const bool negative = c0 == '-';
    const char* s = p + ((c0 == '-') | (c0 == '+'));
    using Mask = typename Isa::Mask;
    constexpr int kW = Isa::kWidth;
    // One block load classifies the whole token: leading digit run, then (after a '.') the
    // fraction run, both as runs of ones in the digit mask.
    const Mask m = Isa::DigitMask(s);
    const int ni = CountTrailingOnes(m);
    if (ni >= kW - 1) return ScanNumber(p, end_, dec);
    const char* fp = s + ni;
    int nf = 0;
    const char* t = fp;
    if (*fp == '.') {
      ++fp;
      nf = CountTrailingOnes(static_cast<Mask>(m >> (ni + 1)));
      if (ni + 1 + nf >= kW) return ScanNumber(p, end_, dec);  // may run past the block
      t = fp + nf;
    }
    if (ni + nf == 0) return ScanNumber(p, end_, dec);  // inf, nan or not a number
    if (t >= end_) return ScanNumber(p, end_, dec);     // the run ran past the chunk
    std::int64_t exp10 = 0;
    if ((*t | 0x20) == 'e') {
      const char* e = t + 1;
      bool eneg = false;
      if (e < end_ && (*e == '+' || *e == '-')) {
        eneg = *e == '-';
        ++e;
      }
      if (e < end_ && IsDigitChar(*e)) {
        if (e + 3 < end_ && IsDigitChar(e[1]) && !IsDigitChar(e[2])) {
          // The usual two-digit exponent ("e-05"), inline.
          exp10 = (e[0] - '0') * 10 + (e[1] - '0');
          t = e + 2;
        } else {
          t = ScanExponentDigits(e, end_, &exp10);
        }
        if (eneg) exp10 = -exp10;
      }
    }
    dec->negative = negative;
    dec->kind = NumberKind::kFinite;
    if (ni <= 3 && ni + nf <= 19) {
      // The integer part of typical tokens has one to three digits, and np.savetxt's '%.18e'
      // has 18 fraction digits: scalar loops take the integer part and the fraction digits
      // past the last 16, Digits16 the last 16 (w = ip * 10^nf + fraction, exact below 10^19).
      std::uint64_t ip = 0;
      for (int i = 0; i < ni; ++i) ip = ip * 10 + static_cast<std::uint64_t>(s[i] - '0');
      const int head = nf > 16 ? nf - 16 : 0;
      for (int i = 0; i < head; ++i) ip = ip * 10 + static_cast<std::uint64_t>(fp[i] - '0');
      const int tail = nf - head;
      std::uint64_t w = ip * kPow10U64[tail];
      if (tail > 0) w += Isa::Digits16(fp + nf, tail);
      dec->w = w;
      dec->q = exp10 - nf;
      dec->truncated = false;
    } else if (ni <= 16 && nf <= 16 && ni + nf <= 19) {
      std::uint64_t w = Isa::Digits16(s + ni, ni) * kPow10U64[nf];
      if (nf > 0) w += Isa::Digits16(fp + nf, nf);
      dec->w = w;
      dec->q = exp10 - nf;
      dec->truncated = false;
    } else {
      DecimalFromRuns(s, ni, fp, nf, exp10, dec);
    }
    return t;
  }

  template <typename M>
  static int CountTrailingOnes(M m) {
    // Position of the first zero bit: __builtin_ctzll of the complement (never all ones here
    // without the caller checking kWidth first; the complement of an all-ones mask is 0).
    std::uint64_t inv = ~static_cast<std::uint64_t>(m);
    if constexpr (sizeof(M) < 8) inv &= (std::uint64_t{1} << (8 * sizeof(M))) - 1;
    return inv == 0 ? static_cast<int>(8 * sizeof(M)) : __builtin_ctzll(inv);
  }

  const char* const begin_;
  const char* const end_;
  const char* const rb_;
  const char* const re_;
  const ParseParams& p_;
  ChunkResult* const out_;
  const bool keyed_;
  const std::string_view comments_;
  const char delim_;
  const std::size_t value_size_;
  const std::size_t row_bytes_;
  CharSet field_end_{};
  CharSet line_end_{};
  CharSet delim_end_{};  // c[3] is the first comment byte
  // FastRow's token starts (the slack takes its unconditional stores past the last token) and
  // its decimals: significand, exponent (clamped to +-9999, which changes no result: with
  // w < 10^19 such values are zero or infinite in every target type), sign bit, and plain_ =
  // finite with at most 19 significant digits.
  static constexpr std::uint32_t kMaxFastTokens = 2048;
  const char* starts_[kMaxFastTokens + 8];
  std::uint64_t w_[kMaxFastTokens];
  std::int32_t q_[kMaxFastTokens];
  std::uint32_t sign_[kMaxFastTokens];
  std::uint8_t plain_[kMaxFastTokens];
  bool sci_misses_ = false;  // this chunk's rows are not in SciRow's shape
  std::uint64_t line_ = 0;
  const char* line_begin_ = nullptr;
};

template <class Isa>
void ParseChunkWith(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ChunkParser<Isa> parser(text, params, out);
  parser.Run();
}

}  // namespace
}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_PARSE_IMPL_H_
