#include "decimal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fast_float/fast_float.h>

namespace embstore::convert {
namespace {

inline bool IsDigit(char c) { return static_cast<unsigned char>(c - '0') < 10; }
inline char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

// True when [p, end) starts with the lower-case ASCII word `w`, in any case.
bool StartsWithNoCase(const char* p, const char* end, std::string_view w) {
  if (static_cast<std::size_t>(end - p) < w.size()) return false;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (Lower(p[i]) != w[i]) return false;
  }
  return true;
}

// Exact powers of ten for Clinger's fast path: a value w * 10^q with w and 10^|q| both exact in
// the type is rounded once by the single multiplication or division.
constexpr double kPow10Double[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
constexpr float kPow10Float[] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                 1e6f, 1e7f, 1e8f, 1e9f, 1e10f};

// The token without its sign, for fast_float (which does not take '+').
std::string_view Unsigned(std::string_view text) {
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) text.remove_prefix(1);
  return text;
}

template <typename T>
T FromCharsExact(std::string_view text, bool negative) {
  std::string_view u = Unsigned(text);
  T v = 0;
  fast_float::from_chars(u.data(), u.data() + u.size(), v);
  return negative ? -v : v;
}

double DecimalToDouble(const Decimal& d, std::string_view text) {
  if (d.truncated) return FromCharsExact<double>(text, d.negative);
  if (d.w == 0) return d.negative ? -0.0 : 0.0;
  double v;
  if (d.w <= (std::uint64_t{1} << 53) && d.q >= -22 && d.q <= 22) {
    v = static_cast<double>(d.w);
    v = d.q < 0 ? v / kPow10Double[-d.q] : v * kPow10Double[d.q];
  } else {
    fast_float::adjusted_mantissa am =
        fast_float::compute_float<fast_float::binary_format<double>>(d.q, d.w);
    if (am.power2 < 0) return FromCharsExact<double>(text, d.negative);
    fast_float::to_float(false, am, v);
  }
  return d.negative ? -v : v;
}

// --- A minimal unsigned big integer for the exact halfway comparison. Little-endian 32-bit limbs.
class BigUint {
 public:
  explicit BigUint(std::uint64_t v = 0) {
    while (v != 0) {
      limbs_.push_back(static_cast<std::uint32_t>(v));
      v >>= 32;
    }
  }
  void MulAdd(std::uint32_t mul, std::uint32_t add) {
    std::uint64_t carry = add;
    for (auto& l : limbs_) {
      std::uint64_t t = std::uint64_t{l} * mul + carry;
      l = static_cast<std::uint32_t>(t);
      carry = t >> 32;
    }
    if (carry != 0) limbs_.push_back(static_cast<std::uint32_t>(carry));
  }
  void MulPow10(std::int64_t n) {
    for (; n >= 9; n -= 9) MulAdd(1000000000u, 0);
    static constexpr std::uint32_t kSmall[] = {1,      10,      100,      1000,     10000,
                                               100000, 1000000, 10000000, 100000000};
    if (n > 0) MulAdd(kSmall[n], 0);
  }
  void ShiftLeft(std::int64_t bits) {
    if (limbs_.empty() || bits <= 0) return;
    std::size_t words = static_cast<std::size_t>(bits / 32);
    int rem = static_cast<int>(bits % 32);
    if (rem != 0) {
      std::uint32_t carry = 0;
      for (auto& l : limbs_) {
        std::uint32_t next = l >> (32 - rem);
        l = (l << rem) | carry;
        carry = next;
      }
      if (carry != 0) limbs_.push_back(carry);
    }
    limbs_.insert(limbs_.begin(), words, 0u);
  }
  static int Compare(const BigUint& a, const BigUint& b) {
    if (a.limbs_.size() != b.limbs_.size()) return a.limbs_.size() < b.limbs_.size() ? -1 : 1;
    for (std::size_t i = a.limbs_.size(); i-- > 0;) {
      if (a.limbs_[i] != b.limbs_[i]) return a.limbs_[i] < b.limbs_[i] ? -1 : 1;
    }
    return 0;
  }

 private:
  std::vector<std::uint32_t> limbs_;  // no leading zero limbs
};

}  // namespace

const char* ScanExponentDigits(const char* p, const char* end, std::int64_t* value) {
  std::int64_t v = 0;
  while (p < end && IsDigit(*p)) {
    // Saturate: any exponent past this bound gives zero or infinity for every type here, and
    // the exact comparison never needs it.
    if (v < 1000000000) v = v * 10 + (*p - '0');
    ++p;
  }
  *value = v;
  return p;
}

void DecimalFromRuns(const char* ip, int ni, const char* fp, int nf, std::int64_t exp10,
                     Decimal* out) {
  out->q = exp10 - nf;
  out->truncated = false;
  while (ni > 0 && *ip == '0') {
    ++ip;
    --ni;
  }
  if (ni == 0) {
    int lead = 0;
    while (lead < nf && fp[lead] == '0') ++lead;
    fp += lead;
    nf -= lead;
  }
  if (ni + nf > 19) {
    out->truncated = true;
    out->w = 0;
    return;
  }
  std::uint64_t w = 0;
  for (int i = 0; i < ni; ++i) w = w * 10 + static_cast<std::uint64_t>(ip[i] - '0');
  for (int i = 0; i < nf; ++i) w = w * 10 + static_cast<std::uint64_t>(fp[i] - '0');
  out->w = w;
}

const char* ScanNumber(const char* p, const char* end, Decimal* out) {
  *out = Decimal{};
  const char* s = p;
  if (s < end && (*s == '+' || *s == '-')) {
    out->negative = *s == '-';
    ++s;
  }
  if (s < end && (Lower(*s) == 'i' || Lower(*s) == 'n')) {
    if (StartsWithNoCase(s, end, "infinity")) {
      out->kind = NumberKind::kInf;
      return s + 8;
    }
    if (StartsWithNoCase(s, end, "inf")) {
      out->kind = NumberKind::kInf;
      return s + 3;
    }
    if (StartsWithNoCase(s, end, "nan")) {
      out->kind = NumberKind::kNan;
      return s + 3;
    }
    return nullptr;
  }
  const char* ip = s;
  while (s < end && IsDigit(*s)) ++s;
  int ni = static_cast<int>(std::min<std::ptrdiff_t>(s - ip, 1 << 30));
  const char* fp = s;
  int nf = 0;
  if (s < end && *s == '.') {
    ++s;
    fp = s;
    while (s < end && IsDigit(*s)) ++s;
    nf = static_cast<int>(std::min<std::ptrdiff_t>(s - fp, 1 << 30));
  }
  if (ni + nf == 0) return nullptr;
  std::int64_t exp10 = 0;
  if (s < end && (*s == 'e' || *s == 'E')) {
    const char* t = s + 1;
    bool eneg = false;
    if (t < end && (*t == '+' || *t == '-')) {
      eneg = *t == '-';
      ++t;
    }
    if (t < end && IsDigit(*t)) {
      s = ScanExponentDigits(t, end, &exp10);
      if (eneg) exp10 = -exp10;
    }
  }
  DecimalFromRuns(ip, ni, fp, nf, exp10, out);
  return s;
}

Encoded EncodeF32(const Decimal& d, std::string_view text) {
  const std::uint32_t sign = d.negative ? 0x80000000u : 0u;
  if (d.kind == NumberKind::kInf) return {sign | 0x7f800000u, false};
  if (d.kind == NumberKind::kNan) return {sign | 0x7fc00000u, false};
  float v;
  if (d.truncated) {
    v = FromCharsExact<float>(text, false);
  } else if (d.w == 0) {
    v = 0.0f;
  } else if (d.w <= (std::uint64_t{1} << 24) && d.q >= -10 && d.q <= 10) {
    v = static_cast<float>(d.w);
    v = d.q < 0 ? v / kPow10Float[-d.q] : v * kPow10Float[d.q];
  } else {
    // Eisel-Lemire straight to binary32: one rounding from the exact decimal.
    fast_float::adjusted_mantissa am =
        fast_float::compute_float<fast_float::binary_format<float>>(d.q, d.w);
    if (am.power2 < 0) {
      v = FromCharsExact<float>(text, false);
    } else {
      fast_float::to_float(false, am, v);
    }
  }
  std::uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits = (bits & 0x7fffffffu) | sign;
  return {bits, (bits & 0x7fffffffu) == 0x7f800000u};
}

bool IsSmallHalfway(double d, int precision, int bias) {
  double a = std::fabs(d);
  if (a == 0 || !std::isfinite(a)) return false;
  int ex;
  std::frexp(a, &ex);
  int e = std::max(ex - 1, 1 - bias);
  if (e > bias) return false;
  double scaled = std::ldexp(a, (precision - 1) - e);
  return scaled - std::floor(scaled) == 0.5;
}

Encoded RoundDoubleToSmall(double d, int precision, int bias, int halfway_dir) {
  const std::uint32_t sign = std::signbit(d) ? 0x8000u : 0u;
  const int exp_bits = 15 - (precision - 1);
  const std::uint32_t exp_all_ones = (1u << exp_bits) - 1;
  const std::uint32_t inf_bits = sign | (exp_all_ones << (precision - 1));
  double a = std::fabs(d);
  if (std::isnan(a)) return {inf_bits | (1u << (precision - 2)), false};
  if (std::isinf(a)) return {inf_bits, false};
  if (a == 0) return {sign, false};
  int ex;
  std::frexp(a, &ex);
  int e = std::max(ex - 1, 1 - bias);  // unbiased exponent; subnormals share the minimum one
  if (e > bias) return {inf_bits, true};
  // scaled = a / quantum, where quantum = 2^(e - precision + 1) is the spacing at exponent e.
  // Both the scaling and the split into integer and fraction are exact in double.
  double scaled = std::ldexp(a, (precision - 1) - e);
  double whole = std::floor(scaled);
  double frac = scaled - whole;
  auto n = static_cast<std::uint32_t>(whole);
  bool up = frac > 0.5 ||
            (frac == 0.5 && (halfway_dir > 0 || (halfway_dir == 0 && (n & 1u) != 0)));
  if (up) ++n;
  if (n == (1u << precision)) {
    n = 1u << (precision - 1);
    ++e;
  }
  if (e > bias) return {inf_bits, true};
  const std::uint32_t hidden = 1u << (precision - 1);
  if (n < hidden) return {sign | n, false};  // subnormal (e is the minimum exponent)
  auto field = static_cast<std::uint32_t>(e + bias);
  return {sign | (field << (precision - 1)) | (n - hidden), false};
}

int CompareDecimalWithDouble(std::string_view text, double d) {
  std::string_view u = Unsigned(text);
  // Digits of the significand, without the point; frac_digits of them follow the point.
  std::string digits;
  std::int64_t frac_digits = 0;
  std::size_t i = 0;
  bool after_point = false;
  for (; i < u.size(); ++i) {
    char c = u[i];
    if (IsDigit(c)) {
      digits.push_back(c);
      if (after_point) ++frac_digits;
    } else if (c == '.') {
      after_point = true;
    } else {
      break;
    }
  }
  std::int64_t exp10 = 0;
  if (i < u.size() && (u[i] == 'e' || u[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < u.size() && (u[i] == '+' || u[i] == '-')) neg = u[i++] == '-';
    ScanExponentDigits(u.data() + i, u.data() + u.size(), &exp10);
    if (neg) exp10 = -exp10;
  }
  std::int64_t e10 = exp10 - frac_digits;
  std::size_t first = digits.find_first_not_of('0');
  double a = std::fabs(d);
  if (first == std::string::npos) return a == 0 ? 0 : -1;
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    ++e10;
  }
  if (a == 0) return 1;
  // |d| = m * 2^k with m a 53-bit integer.
  int ex;
  double fr = std::frexp(a, &ex);
  auto m = static_cast<std::uint64_t>(std::ldexp(fr, 53));
  std::int64_t k = ex - 53;
  BigUint lhs;
  for (std::size_t j = 0; j < digits.size(); j += 9) {
    std::size_t n = std::min<std::size_t>(9, digits.size() - j);
    std::uint32_t chunk = 0;
    std::uint32_t mul = 1;
    for (std::size_t t = 0; t < n; ++t) {
      chunk = chunk * 10 + static_cast<std::uint32_t>(digits[j + t] - '0');
      mul *= 10;
    }
    lhs.MulAdd(mul, chunk);
  }
  BigUint rhs(m);
  if (e10 > 0) lhs.MulPow10(e10); else rhs.MulPow10(-e10);
  if (k > 0) rhs.ShiftLeft(k); else lhs.ShiftLeft(-k);
  return BigUint::Compare(lhs, rhs);
}

namespace {

Encoded EncodeSmall(const Decimal& d, std::string_view text, int precision, int bias) {
  const std::uint32_t sign = d.negative ? 0x8000u : 0u;
  const int exp_bits = 15 - (precision - 1);
  const std::uint32_t inf = ((1u << exp_bits) - 1) << (precision - 1);
  if (d.kind == NumberKind::kInf) return {sign | inf, false};
  if (d.kind == NumberKind::kNan) return {sign | inf | (1u << (precision - 2)), false};
  double v = DecimalToDouble(d, text);
  if (std::isinf(v)) return {sign | inf, true};
  // v is the decimal correctly rounded to double. Rounding v again is right unless v sits exactly
  // on a halfway point of the 16-bit type while the decimal does not: then the decimal's side of
  // v decides, which only an exact comparison can tell.
  int dir = 0;
  if (IsSmallHalfway(v, precision, bias)) dir = CompareDecimalWithDouble(text, v);
  Encoded e = RoundDoubleToSmall(v, precision, bias, dir);
  e.bits = (e.bits & 0x7fffu) | sign;
  return e;
}

}  // namespace

Encoded EncodeF16(const Decimal& d, std::string_view text) { return EncodeSmall(d, text, 11, 15); }
Encoded EncodeBF16(const Decimal& d, std::string_view text) {
  return EncodeSmall(d, text, 8, 127);
}

}  // namespace embstore::convert
