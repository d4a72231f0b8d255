#include "decimal.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace embstore::convert {
using store::BF16ToF32;
using store::F16ToF32;
using store::F32ToF16;

namespace {

// Parses a whole token; fails the test when it is not one number.
Decimal ScanWhole(const std::string& s) {
  Decimal d;
  const char* e = ScanNumber(s.data(), s.data() + s.size(), &d);
  EXPECT_EQ(e, s.data() + s.size()) << "token '" << s << "'";
  return d;
}

bool Accepts(const std::string& s) {
  Decimal d;
  const char* e = ScanNumber(s.data(), s.data() + s.size(), &d);
  return e == s.data() + s.size();
}

std::uint32_t F32Bits(const std::string& s) { return EncodeF32(ScanWhole(s), s).bits; }

std::uint32_t StrtofBits(const std::string& s) {
  float f = std::strtof(s.c_str(), nullptr);
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Exact decimal expansion of a finite double (every binary fraction has one).
std::string ExactDecimal(double v) {
  char buf[1200];
  std::snprintf(buf, sizeof(buf), "%.1074e", v);  // glibc prints exact digits
  std::string s(buf);
  // Strip trailing zeros of the mantissa.
  std::size_t e = s.find('e');
  std::string mant = s.substr(0, e);
  std::string exp = s.substr(e);
  while (!mant.empty() && mant.back() == '0') mant.pop_back();
  if (!mant.empty() && mant.back() == '.') mant.pop_back();
  return mant + exp;
}

TEST(Number, AcceptsEveryNumpySpelling) {
  for (const char* s : {"1", "-1", "+1", "1.5", "-1.5", ".5", "5.", "-.5", "+5.", "1e5", "1E+05",
                        "1e005", "1e-5", "1.e5", ".5e-3", "007", "0", "-0", "inf", "-inf",
                        "+inf", "INF", "Infinity", "-INFINITY", "iNfInItY", "nan", "NaN", "-nan",
                        "+NAN", "123456789012345678901234567890"}) {
    EXPECT_TRUE(Accepts(s)) << s;
  }
}

TEST(Number, RejectsWhatNumpyRejects) {
  for (const char* s : {"0x1p3", "0x10", "1_000", "1.5d0", ".", "-", "+", "", "e5", ".e5", "1e",
                        "1e+", "--1", "+-1", "in", "infin", "nan(123)", "1.2.3", "1,5", "1e5.5",
                        "inf1", "1ee5", "١"}) {
    EXPECT_FALSE(Accepts(s)) << s;
  }
}

TEST(Number, StopsAtTheFirstByteThatCannotContinue) {
  std::string s = "1.5e3x";
  Decimal d;
  const char* e = ScanNumber(s.data(), s.data() + s.size(), &d);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e - s.data(), 5);
}

TEST(Number, SpecialValuesKeepTheirSign) {
  EXPECT_EQ(F32Bits("inf"), 0x7f800000u);
  EXPECT_EQ(F32Bits("-Infinity"), 0xff800000u);
  EXPECT_EQ(F32Bits("nan"), 0x7fc00000u);
  EXPECT_EQ(F32Bits("-nan"), 0xffc00000u);
  EXPECT_EQ(F32Bits("-0"), 0x80000000u);
  EXPECT_EQ(F32Bits("-0.000e10"), 0x80000000u);
  Decimal d = ScanWhole("-inf");
  EXPECT_EQ(EncodeF16(d, "-inf").bits, 0xfc00u);
  EXPECT_EQ(EncodeBF16(d, "-inf").bits, 0xff80u);
  EXPECT_FALSE(EncodeF16(d, "-inf").overflow);  // a literal infinity is not an overflow
}

TEST(Number, F32MatchesStrtofOnRandomTokens) {
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> prec(0, 25);
  std::uniform_int_distribution<int> kind(0, 5);
  char buf[128];
  for (int i = 0; i < 200000; ++i) {
    double v;
    switch (kind(rng)) {
      case 0: {  // any finite double bit pattern
        std::uint64_t bits = rng();
        std::memcpy(&v, &bits, 8);
        if (!std::isfinite(v)) continue;
        break;
      }
      case 1: v = std::normal_distribution<double>(0, 1)(rng); break;
      case 2: v = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                             std::uniform_int_distribution<int>(-160, 130)(rng));
        break;
      default: v = std::normal_distribution<double>(0, 100)(rng); break;
    }
    const char* fmts[] = {"%.*e", "%.*g", "%.*f", "%.*E"};
    int f = static_cast<int>(rng() % 4);
    int p = prec(rng);
    if (f == 2 && std::fabs(v) > 1e30) continue;
    std::snprintf(buf, sizeof(buf), fmts[f], p, v);
    std::string s(buf);
    ASSERT_EQ(F32Bits(s), StrtofBits(s)) << s;
  }
}

TEST(Number, F32MatchesStrtofOnFloatHalfwayPoints) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    // A random positive float and its successor; their midpoint is exact in double.
    auto bits = static_cast<std::uint32_t>(rng() % 0x7f7fffffu);
    float lo;
    std::memcpy(&lo, &bits, 4);
    float hi = std::nextafter(lo, INFINITY);
    double mid = (static_cast<double>(lo) + static_cast<double>(hi)) / 2;
    std::string exact = ExactDecimal(mid);
    ASSERT_EQ(F32Bits(exact), StrtofBits(exact)) << exact;
    // A hair above and below: append digits past the exact expansion.
    std::size_t e = exact.find('e');
    std::string mant = exact.substr(0, e);
    if (mant.find('.') == std::string::npos) mant += ".";
    std::string above = mant + "0000000000000000000000000000001" + exact.substr(e);
    ASSERT_EQ(F32Bits(above), StrtofBits(above)) << above;
    // Below: decrement the last digit then append nines.
    std::string below = mant;
    std::size_t k = below.size() - 1;
    while (below[k] == '0' || below[k] == '.') {
      if (below[k] == '0') below[k] = '9';
      --k;
    }
    below[k] = static_cast<char>(below[k] - 1);
    below += "99999999999999999999999999999" + exact.substr(e);
    ASSERT_EQ(F32Bits(below), StrtofBits(below)) << below;
  }
}

TEST(Number, F32AvoidsTheDoubleRoundingThatNumpyHas) {
  // 1 + 2^-24 is halfway between 1 and the next float; a 1 in the 45th decimal puts the decimal
  // just above it, yet the nearest double is the halfway point itself, which float() rounds to
  // even (1.0).
  std::string half = ExactDecimal(1.0 + std::ldexp(1.0, -24));  // 1.000000059604644775390625
  std::size_t e = half.find('e');
  std::string s = half.substr(0, e) + "00000000000000000001" + half.substr(e);
  double via_double = std::strtod(s.c_str(), nullptr);
  float numpy_like = static_cast<float>(via_double);
  EXPECT_EQ(numpy_like, 1.0f);
  std::uint32_t bits = F32Bits(s);
  EXPECT_EQ(bits, StrtofBits(s));
  float ours;
  std::memcpy(&ours, &bits, 4);
  EXPECT_EQ(ours, std::nextafter(1.0f, 2.0f));
}

TEST(Number, F32HandlesSubnormalsAndOverflowBoundaries) {
  for (const char* s :
       {"1e-45", "1.4e-45", "7e-46", "7.006492321624085e-46", "7.006492321624086e-46",
        "1.1754942e-38", "1.17549435e-38", "3.4028234e38", "3.4028235e38",
        "340282356779733661637539395458142568447", "340282356779733661637539395458142568448",
        "340282356779733661637539395458142568449", "3.5e38", "1e39", "1e-50", "-1e-50"}) {
    ASSERT_EQ(F32Bits(s), StrtofBits(s)) << s;
  }
  Decimal d = ScanWhole("1e39");
  EXPECT_TRUE(EncodeF32(d, "1e39").overflow);
  d = ScanWhole("340282356779733661637539395458142568447");
  EXPECT_FALSE(EncodeF32(d, "340282356779733661637539395458142568447").overflow);
}

TEST(Number, F32HandlesMantissasOfHundredsOfDigits) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::string s = (rng() & 1) ? "-" : "";
    int n = 100 + static_cast<int>(rng() % 400);
    int point = static_cast<int>(rng() % static_cast<unsigned>(n));
    for (int k = 0; k < n; ++k) {
      if (k == point) s += '.';
      s += static_cast<char>('0' + rng() % 10);
    }
    s += "e" + std::to_string(static_cast<int>(rng() % 120) - 60 - point / 2);
    ASSERT_EQ(F32Bits(s), StrtofBits(s)) << s;
  }
}

// Reference for the 16-bit types: the exact decimal compared against every midpoint between
// neighbouring values (midpoints are exact doubles, so CompareDecimalWithDouble is exact).
std::uint16_t ReferenceSmall(const std::string& s, int precision, int bias,
                             float (*to_f32)(std::uint16_t), bool* overflow) {
  bool neg = s[0] == '-';
  *overflow = false;
  // Positive 16-bit patterns in increasing order of value: 0 .. largest finite.
  const std::uint16_t inf = static_cast<std::uint16_t>(((1u << (15 - (precision - 1))) - 1)
                                                       << (precision - 1));
  std::uint16_t lo = 0;
  std::uint16_t hi = inf;  // search the first pattern whose upper midpoint is >= the decimal
  while (lo < hi) {
    std::uint16_t mid = static_cast<std::uint16_t>((lo + hi) / 2);
    double a = to_f32(mid);
    double b = mid + 1 == inf ? std::ldexp(1.0, bias + 1)
                              : to_f32(static_cast<std::uint16_t>(mid + 1));
    double m = (a + b) / 2;
    int c = CompareDecimalWithDouble(s, m);
    // At an exact midpoint, ties go to the even pattern.
    bool rounds_up = c > 0 || (c == 0 && (mid & 1) != 0);
    if (rounds_up) lo = static_cast<std::uint16_t>(mid + 1); else hi = mid;
  }
  if (lo == inf) *overflow = true;
  return static_cast<std::uint16_t>(lo | (neg ? 0x8000u : 0u));
}

float F16ToF32Ref(std::uint16_t h) { return F16ToF32(h); }
float BF16ToF32Ref(std::uint16_t h) { return BF16ToF32(h); }

TEST(Number, F16AndBF16AreRoundedOnceFromTheDecimal) {
  std::mt19937_64 rng(11);
  char buf[128];
  for (int i = 0; i < 20000; ++i) {
    double v = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                          std::uniform_int_distribution<int>(-140, 130)(rng));
    std::snprintf(buf, sizeof(buf), "%.*e", static_cast<int>(rng() % 20), v);
    std::string s(buf);
    Decimal d = ScanWhole(s);
    bool ovf;
    std::uint16_t ref = ReferenceSmall(s, 11, 15, F16ToF32Ref, &ovf);
    Encoded e = EncodeF16(d, s);
    ASSERT_EQ(e.bits, ref) << s;
    ASSERT_EQ(e.overflow, ovf) << s;
    ref = ReferenceSmall(s, 8, 127, BF16ToF32Ref, &ovf);
    e = EncodeBF16(d, s);
    ASSERT_EQ(e.bits, ref) << s;
    ASSERT_EQ(e.overflow, ovf) << s;
  }
}

TEST(Number, F16HalfwayCasesFollowTheDecimalNotTheDouble) {
  struct Case {
    const char* text;
    std::uint16_t f16;
  };
  // 2049 is exactly halfway between 2048 and 2050 (f16 spacing 2 there): ties to even.
  const Case cases[] = {
      {"2049", 0x6800},                                    // 2048
      {"2049.0000000000000000000000001", 0x6801},          // 2050: a hair above halfway
      {"2048.9999999999999999999999999", 0x6800},          // 2048
      {"2051", 0x6802},                                    // 2052 (tie to even)
      {"65504", 0x7bff},                                   // largest finite
      {"65519.999999999999999999999", 0x7bff},             // just below the overflow midpoint
      {"5.9604644775390625e-8", 0x0001},                   // smallest subnormal
      {"2.98023223876953125e-8", 0x0000},                  // half of it: ties to even (zero)
      {"2.9802322387695312500000000001e-8", 0x0001},       // a hair above: rounds up
      {"-2.9802322387695312500000000001e-8", 0x8001},
  };
  for (const Case& c : cases) {
    std::string s = c.text;
    Encoded e = EncodeF16(ScanWhole(s), s);
    EXPECT_EQ(e.bits, c.f16) << s;
    EXPECT_FALSE(e.overflow) << s;
  }
  // 65520 is the midpoint between 65504 and 2^16: ties to even is infinity, an overflow.
  for (const char* s : {"65520", "65520.000000000000000000001", "1e5", "-1e300", "1e400"}) {
    Encoded e = EncodeF16(ScanWhole(s), s);
    EXPECT_TRUE(e.overflow) << s;
    EXPECT_EQ(e.bits & 0x7fffu, 0x7c00u) << s;
  }
}

TEST(Number, F16DoesNotDoubleRoundThroughF32) {
  // Halfway between f16 1.0 and 1.0009765625 is 1 + 2^-11. A decimal just above it must round
  // up, yet it rounds to f32 as exactly 1 + 2^-11, which then rounds to even (1.0).
  std::string s = ExactDecimal(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
  float via_f32 = std::strtof(s.c_str(), nullptr);
  EXPECT_EQ(static_cast<double>(via_f32), 1.0 + std::ldexp(1.0, -11));
  EXPECT_EQ(F32ToF16(via_f32), 0x3c00u);  // what the two-step path would store
  EXPECT_EQ(EncodeF16(ScanWhole(s), s).bits, 0x3c01u);
  // The same for bfloat16 (8 significand bits): 1 + 2^-8 is its midpoint.
  s = ExactDecimal(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40));
  EXPECT_EQ(EncodeBF16(ScanWhole(s), s).bits, 0x3f81u);
}

TEST(Number, BF16OverflowBoundary) {
  // Largest finite bf16 is 0x7f7f = 3.3895314e38; the midpoint to 2^128 is 3.3961775e38.
  const char* over = "339617752923046005526922703901628039169";  // 1 above the midpoint
  EXPECT_TRUE(EncodeBF16(ScanWhole(over), over).overflow);
  const char* at = "339617752923046005526922703901628039168";  // the midpoint: ties to inf
  EXPECT_TRUE(EncodeBF16(ScanWhole(at), at).overflow);
  const char* below = "339617752923046005526922703901628039167";
  EXPECT_FALSE(EncodeBF16(ScanWhole(below), below).overflow);
  const char* under = "3.3895314e38";
  Encoded e = EncodeBF16(ScanWhole(under), under);
  EXPECT_FALSE(e.overflow);
  EXPECT_EQ(e.bits, 0x7f7fu);
}

TEST(Number, CompareDecimalWithDoubleIsExact) {
  EXPECT_EQ(CompareDecimalWithDouble("0.5", 0.5), 0);
  EXPECT_EQ(CompareDecimalWithDouble("0.50000000000000000000000001", 0.5), 1);
  EXPECT_EQ(CompareDecimalWithDouble("0.49999999999999999999999999", 0.5), -1);
  EXPECT_EQ(CompareDecimalWithDouble("-2049e0", -2049.0), 0);
  EXPECT_EQ(CompareDecimalWithDouble("20.49e2", 2049.0), 0);
  EXPECT_EQ(CompareDecimalWithDouble("0.1", 0.1), -1);  // 0.1 as a double is slightly above
  EXPECT_EQ(CompareDecimalWithDouble("5e-324", 4.9406564584124654e-324), 1);
}

}  // namespace
}  // namespace embstore::convert
