// Every SIMD kernel against the scalar reference kernel, on random text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "embstore/convert/parse_kernels.h"

namespace embstore::convert {
namespace {

// Parses `text` with `k`, with padding around it so whole SIMD blocks stay readable. The bytes
// after the chunk are `after` repeated: digits, or digits and blanks, must never leak into a
// number of the last line.
ChunkResult ParseWith(const ParseKernel& k, const std::string& text, const ParseParams& p,
                      std::string_view after = "9") {
  const std::size_t pad = 128;
  std::string buf(pad, '7');  // digits before the chunk must never leak into a number
  buf += text;
  while (buf.size() < text.size() + 2 * pad) buf += after;
  ChunkText t{buf.data() + pad, buf.data() + pad + text.size(), buf.data(),
              buf.data() + buf.size()};
  ChunkResult r;
  k.parse(t, p, &r);
  return r;
}

void ExpectSame(const ChunkResult& a, const ChunkResult& b, const std::string& text) {
  ASSERT_EQ(static_cast<int>(a.error.kind), static_cast<int>(b.error.kind)) << text;
  EXPECT_EQ(a.error.line, b.error.line) << text;
  EXPECT_EQ(a.error.line_begin, b.error.line_begin) << text;
  EXPECT_EQ(a.error.offset, b.error.offset) << text;
  EXPECT_EQ(a.error.length, b.error.length) << text;
  EXPECT_EQ(a.error.found, b.error.found) << text;
  EXPECT_EQ(a.rows, b.rows) << text;
  EXPECT_EQ(a.lines, b.lines) << text;
  ASSERT_EQ(a.values.size(), b.values.size()) << text;
  EXPECT_TRUE(a.values == b.values) << text;
  EXPECT_EQ(a.keys, b.keys) << text;
  EXPECT_EQ(a.key_ends, b.key_ends) << text;
  EXPECT_EQ(a.row_line, b.row_line) << text;
}

std::string RandomNumber(std::mt19937_64& rng) {
  char buf[96];
  std::uniform_int_distribution<int> kind(0, 9);
  double v = std::normal_distribution<double>(0, 1)(rng) *
             std::pow(10.0, std::uniform_int_distribution<int>(-8, 8)(rng));
  switch (kind(rng)) {
    case 0:
      std::snprintf(buf, sizeof buf, "%.18e", v);
      break;
    case 1:
      std::snprintf(buf, sizeof buf, "%.8g", v);
      break;
    case 2:
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(rng() % 25), v);
      break;
    case 3:
      std::snprintf(buf, sizeof buf, "%+.3E", v);
      break;
    case 4:
      std::snprintf(buf, sizeof buf, "%.30g", v);
      break;
    case 5: {
      // Long digit runs: 10 to 70 digits with a point somewhere.
      std::string s;
      int n = 10 + static_cast<int>(rng() % 60);
      for (int i = 0; i < n; ++i) s += static_cast<char>('0' + rng() % 10);
      s.insert(rng() % s.size(), ".");
      return s;
    }
    case 6: {
      const char* special[] = {"inf", "-Infinity", "nan",   "+NaN", ".5",
                               "5.",  "-0",        "1e005", "007",  "1E+05"};
      return special[rng() % 10];
    }
    default:
      std::snprintf(buf, sizeof buf, "%g", v);
      break;
  }
  return buf;
}

std::string RandomJunk(std::mt19937_64& rng) {
  const char* junk[] = {"abc", "1_000", "0x1p3",  ".",    "1.5d0", "1e", "--1", "1.2.3",
                        "",    "\xff",  "nan(1)", "1e5x", "+",     "#",  "1,5", "\r"};
  return junk[rng() % 16];
}

std::string RandomText(std::mt19937_64& rng, const ParseParams& p, bool allow_errors) {
  std::string s;
  int rows = 1 + static_cast<int>(rng() % 40);
  const char* breaks[] = {"\n", "\r\n", "\r"};
  const char* brk = breaks[rng() % 3];
  for (int r = 0; r < rows; ++r) {
    int kind = static_cast<int>(rng() % 20);
    if (kind == 0) {
      s += brk;  // blank line
      continue;
    }
    if (kind == 1 && p.layout == Layout::kMatrix) {
      s += "# a comment 1 2 3";
      s += brk;
      continue;
    }
    if (rng() % 4 == 0) s += (rng() & 1) ? "  " : "\t";
    if (p.layout == Layout::kKeyed) {
      const char* keys[] = {"the", "caf\xc3\xa9", "x1", "1999", "#tag", "\xe2\x82\xac"};
      s += keys[rng() % 6];
      s += std::to_string(r);
      s += ' ';
    }
    std::uint32_t n = p.dim;
    if (allow_errors && rng() % 30 == 0) n = n + (rng() % 3) - 1;  // ragged
    for (std::uint32_t j = 0; j < n; ++j) {
      if (j > 0) {
        if (p.delimiter != 0) {
          if (rng() % 5 == 0) s += ' ';
          s += p.delimiter;
          if (rng() % 5 == 0) s += '\t';
        } else {
          s += (rng() % 6 == 0) ? " \t " : " ";
        }
      }
      if (allow_errors && rng() % 400 == 0) {
        s += RandomJunk(rng);
      } else {
        s += RandomNumber(rng);
      }
    }
    if (rng() % 5 == 0) s += "  ";
    if (p.layout == Layout::kMatrix && rng() % 7 == 0) s += " # trailing";
    if (r + 1 < rows || rng() % 2 == 0) s += brk;
  }
  return s;
}

class KernelVsScalar : public ::testing::TestWithParam<const ParseKernel*> {};

TEST_P(KernelVsScalar, AgreesOnRandomValidAndInvalidText) {
  const ParseKernel& simd = *GetParam();
  ParseChunkFn scalar_fn = &ParseChunkScalar;
  ParseKernel scalar{"scalar", scalar_fn};
  std::mt19937_64 rng(1234);
  const int iterations = 3000;
  for (int it = 0; it < iterations; ++it) {
    ParseParams p;
    p.layout = (rng() % 3 == 0) ? Layout::kKeyed : Layout::kMatrix;
    p.delimiter = (p.layout == Layout::kMatrix && rng() % 3 == 0) ? ',' : '\0';
    p.comments = (rng() % 4 == 0) ? "//" : "#";
    p.dim = 1 + static_cast<std::uint32_t>(rng() % 12);
    p.dtype = static_cast<DType>(rng() % 3);
    p.overflow_is_error = (rng() & 1) != 0;
    const std::string text = RandomText(rng, p, it % 2 == 1);
    ChunkResult a = ParseWith(scalar, text, p);
    ChunkResult b = ParseWith(simd, text, p);
    ExpectSame(a, b, text);
    if (HasFatalFailure()) return;
  }
}

TEST_P(KernelVsScalar, AgreesOnRandomBytes) {
  const ParseKernel& simd = *GetParam();
  ParseKernel scalar{"scalar", &ParseChunkScalar};
  std::mt19937_64 rng(99);
  const char alphabet[] = "0123456789.eE+-  \t\n\r#,infaINFAxyz\xc3\xa9";
  for (int it = 0; it < 5000; ++it) {
    std::string text;
    int n = static_cast<int>(rng() % 300);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % (sizeof(alphabet) - 1)];
    ParseParams p;
    p.layout = (rng() % 3 == 0) ? Layout::kKeyed : Layout::kMatrix;
    p.delimiter = (p.layout == Layout::kMatrix && rng() % 3 == 0) ? ',' : '\0';
    p.comments = "#";
    p.dim = 1 + static_cast<std::uint32_t>(rng() % 4);
    p.dtype = static_cast<DType>(rng() % 3);
    ExpectSame(ParseWith(scalar, text, p), ParseWith(simd, text, p), text);
    if (HasFatalFailure()) return;
  }
}

// The f32 values of `r` equal glibc strtof() on `tokens`, bit for bit.
void ExpectStrtofBits(const ChunkResult& r, const std::vector<std::string>& tokens) {
  ASSERT_EQ(r.values.size(), tokens.size() * 4);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const float want = std::strtof(tokens[i].c_str(), nullptr);
    std::uint32_t got_bits, want_bits;
    std::memcpy(&got_bits, r.values.data() + 4 * i, 4);
    std::memcpy(&want_bits, &want, 4);
    ASSERT_EQ(got_bits, want_bits) << tokens[i];
  }
}

// Tokens that stress the fast encoders' error bounds: halfway points between neighbouring
// binary32 values (exact and printed a hair above or below), 19-digit significands above 2^63,
// the overflow and subnormal boundaries, zeros; in rows long enough for the batch encoders.
std::string HardToken(std::mt19937_64& rng) {
  char buf[128];
  float f;
  do {
    std::uint32_t bits = static_cast<std::uint32_t>(rng()) & 0x7fffffffu;
    std::memcpy(&f, &bits, 4);
  } while (!std::isfinite(f) || f == std::numeric_limits<float>::max());
  const double half =
      0.5 * (static_cast<double>(f) + static_cast<double>(std::nextafter(f, INFINITY)));
  const char* sign = (rng() & 1) ? "-" : "";
  switch (rng() % 9) {
    case 0:
      std::snprintf(buf, sizeof buf, "%s%.60e", sign, half);
      break;
    case 1:
      std::snprintf(buf, sizeof buf, "%s%.18e", sign, half);
      break;
    case 2:
      std::snprintf(buf, sizeof buf, "%s%.9e", sign, half);
      break;
    case 3:
      std::snprintf(buf, sizeof buf, "%s%.18e", sign, std::nextafter(half, INFINITY));
      break;
    case 4:
      std::snprintf(buf, sizeof buf, "%s%.18e", sign, std::nextafter(half, 0.0));
      break;
    case 5: {
      // 19 digits starting with 9 (the significand exceeds 2^63).
      std::snprintf(buf, sizeof buf, "%s9.%018llue%d", sign,
                    static_cast<unsigned long long>(rng() % 1000000000000000000ull),
                    static_cast<int>(rng() % 90) - 45);
      break;
    }
    case 6: {
      const char* edge[] = {"3.4028235677973366e38",
                            "3.40282356779733661637539395458142568448e38",
                            "3.4028235e38",
                            "3.4028236e38",
                            "1.1754943508222875e-38",
                            "1.1754942e-38",
                            "1.4e-45",
                            "7.0064923216240854e-46",
                            "0.0",
                            "-0e5",
                            "1e-64",
                            "1e64",
                            "9999999999999999999e-83"};
      return edge[rng() % 13];
    }
    case 7:
      std::snprintf(buf, sizeof buf, "%s%.8g", sign, static_cast<double>(f));
      break;
    default:
      std::snprintf(buf, sizeof buf, "%s%.18e", sign, static_cast<double>(f));
      break;
  }
  return buf;
}

TEST_P(KernelVsScalar, AgreesOnHardRoundingCasesInLongRows) {
  const ParseKernel& simd = *GetParam();
  ParseKernel scalar{"scalar", &ParseChunkScalar};
  std::mt19937_64 rng(4242);
  for (int it = 0; it < 400; ++it) {
    ParseParams p;
    p.layout = (it % 4 == 0) ? Layout::kKeyed : Layout::kMatrix;
    p.dim = 8 + static_cast<std::uint32_t>(rng() % 40);
    p.dtype = DType::kF32;
    p.overflow_is_error = (it % 3) != 0;
    std::string text;
    std::vector<std::string> tokens;
    for (int r = 0; r < 10; ++r) {
      if (p.layout == Layout::kKeyed) text += "k" + std::to_string(r) + " ";
      for (std::uint32_t j = 0; j < p.dim; ++j) {
        tokens.push_back(HardToken(rng));
        text += tokens.back();
        text += j + 1 < p.dim ? " " : "\n";
      }
    }
    ChunkResult a = ParseWith(scalar, text, p);
    ChunkResult b = ParseWith(simd, text, p);
    ExpectSame(a, b, text);
    if (HasFatalFailure()) return;
    if (a.error.kind != ErrorKind::kNone) continue;  // an overflow, reported the same way
    // And both equal glibc's strtof, value by value.
    ExpectStrtofBits(a, tokens);
    if (HasFatalFailure()) return;
  }
}

// Short tokens (the shape the SIMD kernels scan eight at a time) and near misses.
std::string ShortToken(std::mt19937_64& rng, bool allow_errors) {
  char buf[64];
  const double v = std::normal_distribution<double>(0, 1)(rng) *
                   std::pow(10.0, std::uniform_int_distribution<int>(-6, 6)(rng));
  switch (rng() % 12) {
    case 11: {
      // Within a few units of a double's last place of a binary32 halfway point, in 14 or 15
      // characters: the approximate product may land on either side.
      const float f = static_cast<float>(
          std::ldexp(1.0 + (rng() % (1u << 23)) * 0x1p-23, static_cast<int>(rng() % 40) - 20));
      const double half =
          0.5 * (static_cast<double>(f) + static_cast<double>(std::nextafter(f, INFINITY)));
      std::snprintf(buf, sizeof buf, "%.*g", (rng() & 1) ? 13 : 14, half);
      break;
    }
    case 0:
      std::snprintf(buf, sizeof buf, "%.3f", v);
      break;
    case 1:
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      break;
    case 2: {
      const char* edge[] = {"-0",
                            "0",
                            ".5",
                            "5.",
                            "+7",
                            "-.25",
                            "+0.0",
                            "123456789012345",
                            "1234567890123456",
                            "-12345678901234.5",
                            "0.000000000000001",
                            "999999999999999",
                            "00000000000000.1",
                            "-1.5e3",
                            "1E-2",
                            "inf"};
      return edge[rng() % 16];
    }
    case 3:
      if (allow_errors && rng() % 8 == 0) {
        const char* junk[] = {".", "1.2.3", "-", "1-2", "+-1", "1e", "x", "1.5d0", "--1", "1_0"};
        return junk[rng() % 10];
      }
      [[fallthrough]];
    default:
      std::snprintf(buf, sizeof buf, "%.8g", v);
      break;
  }
  return buf;
}

// Scientific-notation tokens (the shape the SIMD kernels scan eight at a time) and near misses.
std::string SciToken(std::mt19937_64& rng, bool allow_errors) {
  char buf[96];
  const double v = std::normal_distribution<double>(0, 1)(rng) *
                   std::pow(10.0, std::uniform_int_distribution<int>(-45, 40)(rng));
  const char* sign = (rng() % 3 == 0) ? "+" : "";
  switch (rng() % 12) {
    case 0:
      std::snprintf(buf, sizeof buf, "%s%.17e", sign, v);
      break;
    case 1:
      std::snprintf(buf, sizeof buf, "%s%.16E", sign, v);
      break;
    case 2:
      std::snprintf(buf, sizeof buf, "%.15e", v);
      break;
    case 3: {
      // Halfway points between binary32 neighbours, to 18 fraction digits.
      const float f = static_cast<float>(
          std::ldexp(1.0 + (rng() % (1u << 23)) * 0x1p-23, static_cast<int>(rng() % 250) - 125));
      std::snprintf(
          buf, sizeof buf, "%.18e",
          0.5 * (static_cast<double>(f) + static_cast<double>(std::nextafter(f, INFINITY))));
      break;
    }
    case 4: {
      const char* edge[] = {"0.000000000000000000e+00",   "-0.000000000000000000e+00",
                            "3.402823466385288598e+38",   "3.402823569e+38",
                            "3.402823677973366163e+38",   "9.999999999999999999e+99",
                            "1.000000000000000000e-50",   "1.401298464324817071e-45",
                            "7.006492321624085354e-46",   "1.175494350822287508e-38",
                            "1.234567890123456789e5",     "1.234567890123456789e+123",
                            "9.999999999999999999e-01",   "1.234567890123456789E-05",
                            "1.234567890123456789e+0012", "-5.555555555555555555e-0007"};
      return edge[rng() % 16];
    }
    case 5:
      if (allow_errors && rng() % 4 == 0) {
        const char* junk[] = {"1.234567890123456789e+",     "1.234567890123456789e+1234",
                              "1.234567890123456789x+01",   "1..34567890123456789e+01",
                              "+-1.234567890123456789e+01", "1.234567890123456789e-05x",
                              "1.234567890123456789e+0-1",  "12.34567890123456789e+01",
                              "1,234567890123456789e+01",   "1e234567890123456789e+01"};
        return junk[rng() % 10];
      }
      [[fallthrough]];
    default:
      std::snprintf(buf, sizeof buf, "%s%.18e", sign, v);
      break;
  }
  return buf;
}

// Rows of `dim` tokens from `token` (some with errors), every kernel against the scalar one and,
// where valid, against glibc's strtof; the bytes after the chunk alternate between digits and
// digits with blanks.
template <class TokenFn>
void CheckRowsOf(const ParseKernel& simd, TokenFn token, std::uint32_t max_dim, int iterations,
                 std::uint64_t seed, DType dtype = DType::kF32) {
  ParseKernel scalar{"scalar", &ParseChunkScalar};
  std::mt19937_64 rng(seed);
  for (int it = 0; it < iterations; ++it) {
    const bool allow_errors = it % 3 == 0;
    ParseParams p;
    p.layout = (it % 5 == 0) ? Layout::kKeyed : Layout::kMatrix;
    p.dim = 1 + static_cast<std::uint32_t>(rng() % max_dim);
    p.dtype = dtype;
    p.overflow_is_error = (it % 2) != 0;
    const char* brk = (rng() % 4 == 0) ? "\r\n" : "\n";
    std::string text;
    std::vector<std::string> tokens;
    const int rows = 1 + static_cast<int>(rng() % 8);
    for (int r = 0; r < rows; ++r) {
      if (p.layout == Layout::kKeyed) text += "key" + std::to_string(r) + " ";
      for (std::uint32_t j = 0; j < p.dim; ++j) {
        tokens.push_back(token(rng, allow_errors));
        text += tokens.back();
        if (j + 1 < p.dim) text += (rng() % 10 == 0) ? "\t" : (rng() % 10 == 0) ? "  " : " ";
      }
      if (r + 1 < rows || rng() % 2 == 0) text += brk;
    }
    const char* after = (it % 2 == 0) ? "5 " : "9";
    ChunkResult a = ParseWith(scalar, text, p, after);
    ChunkResult b = ParseWith(simd, text, p, after);
    ExpectSame(a, b, text);
    if (::testing::Test::HasFatalFailure()) return;
    if (a.error.kind != ErrorKind::kNone || dtype != DType::kF32) continue;
    ExpectStrtofBits(a, tokens);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST_P(KernelVsScalar, AgreesOnRowsOfShortTokens) {
  CheckRowsOf(*GetParam(), ShortToken, 40, 1500, 777);
}

TEST_P(KernelVsScalar, AgreesOnRowsOfScientificTokens) {
  CheckRowsOf(*GetParam(), SciToken, 40, 1500, 31337);
}

// np.savetxt's '%.18e' exactly (the template the AVX2 kernel checks by byte classes), with a
// leading sign or not, and where errors are allowed one byte in six tokens replaced by any byte:
// every class boundary (digits, '.', 'e'/'E', signs, blanks, line breaks and their neighbours
// in the nibble tables, such as ')' and '\x0b') lands at every template position.
std::string Sci18Token(std::mt19937_64& rng, bool allow_errors) {
  char buf[96];
  const double v = std::normal_distribution<double>(0, 1)(rng) *
                   std::pow(10.0, std::uniform_int_distribution<int>(-40, 38)(rng));
  const char* sign = (rng() % 5 == 0) ? "+" : "";
  std::snprintf(buf, sizeof buf, (rng() % 9 == 0) ? "%s%.18E" : "%s%.18e", sign, v);
  std::string t = buf;
  if (allow_errors && rng() % 6 == 0) t[rng() % t.size()] = static_cast<char>(rng() % 256);
  return t;
}

TEST_P(KernelVsScalar, AgreesOnRowsOfSavetxtTokensAndOneByteChanges) {
  CheckRowsOf(*GetParam(), Sci18Token, 40, 1500, 4242);
  if (HasFatalFailure()) return;
  CheckRowsOf(*GetParam(), Sci18Token, 40, 300, 4243, DType::kF16);
  if (HasFatalFailure()) return;
  CheckRowsOf(*GetParam(), Sci18Token, 40, 300, 4244, DType::kBF16);
}

// Short tokens near halfway points of a 16-bit format (`precision` significand bits): exact,
// and printed to 13-15 significant digits (a hair off, either side), plus the overflow edge.
std::string SmallHalfwayToken(std::mt19937_64& rng, int precision) {
  char buf[64];
  const int bits = precision - 1;
  const double v = std::ldexp(
      1.0 + (static_cast<double>(rng() % (1u << bits)) + 0.5) / static_cast<double>(1u << bits),
      static_cast<int>(rng() % 30) - 20);
  switch (rng() % 4) {
    case 0:
      std::snprintf(buf, sizeof buf, "%.15g", v);
      break;
    case 1:
      std::snprintf(buf, sizeof buf, "%.14g", v);
      break;
    case 2:
      std::snprintf(buf, sizeof buf, "%.13g", v);
      break;
    default: {
      const char* edge[] = {"65519.99",
                            "65520",
                            "65520.01",
                            "65504",
                            "-65520",
                            "0.00006103515625",
                            "0.0000000596046447753906",
                            "1.00048828125",
                            "1.00390625"};
      return edge[rng() % 9];
    }
  }
  return buf;
}

TEST_P(KernelVsScalar, AgreesOnRowsInF16AndBF16) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(t));
    const int precision = t == DType::kF16 ? 11 : 8;
    CheckRowsOf(*GetParam(), ShortToken, 40, 500, 91, t);
    CheckRowsOf(*GetParam(), SciToken, 40, 500, 92, t);
    CheckRowsOf(
        *GetParam(),
        [&](std::mt19937_64& rng, bool allow_errors) {
          return rng() % 4 == 0 ? ShortToken(rng, allow_errors) : SmallHalfwayToken(rng, precision);
        },
        40, 500, 93, t);
    if (HasFatalFailure()) return;
  }
}

std::vector<const ParseKernel*> SimdKernels() {
  std::vector<const ParseKernel*> v;
  for (const ParseKernel* k : SupportedParseKernels()) {
    if (std::string(k->name) != "scalar") v.push_back(k);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Simd, KernelVsScalar, ::testing::ValuesIn(SimdKernels()),
                         [](const auto& param_info) {
                           return std::string(param_info.param->name);
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(KernelVsScalar);

TEST(ScalarKernel, ParsesAMatrixWithCommentsBlankLinesAndCrlf) {
  ParseKernel scalar{"scalar", &ParseChunkScalar};
  ParseParams p;
  p.dim = 2;
  p.comments = "#";
  std::string text = "1 2\r\n\r\n# c\r\n  3\t4 # x\r\n5 6";
  ChunkResult r = ParseWith(scalar, text, p);
  ASSERT_EQ(r.error.kind, ErrorKind::kNone);
  ASSERT_EQ(r.rows, 3u);
  EXPECT_EQ(r.lines, 4u);
  float v[6];
  std::memcpy(v, r.values.data(), sizeof v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[3], 4.0f);
  EXPECT_EQ(v[5], 6.0f);
}

TEST(ScalarKernel, ReportsRaggedRowsWithTheirPosition) {
  ParseKernel scalar{"scalar", &ParseChunkScalar};
  ParseParams p;
  p.dim = 3;
  ChunkResult r = ParseWith(scalar, "1 2 3\n4 5\n", p);
  ASSERT_EQ(r.error.kind, ErrorKind::kTooFewValues);
  EXPECT_EQ(r.error.line, 1u);
  EXPECT_EQ(r.error.line_begin, 6u);
  EXPECT_EQ(r.error.found, 2u);
  EXPECT_EQ(r.rows, 1u);
  EXPECT_EQ(r.values.size(), 12u);
  r = ParseWith(scalar, "1 2 3 4 5\n", p);
  ASSERT_EQ(r.error.kind, ErrorKind::kTooManyValues);
  EXPECT_EQ(r.error.offset, 6u);
  EXPECT_EQ(r.error.found, 5u);
}

TEST(ScalarKernel, ReportsBadTokensWholeAndEmptyFields) {
  ParseKernel scalar{"scalar", &ParseChunkScalar};
  ParseParams p;
  p.dim = 2;
  ChunkResult r = ParseWith(scalar, "1 2\n3 1.5d0\n", p);
  ASSERT_EQ(r.error.kind, ErrorKind::kBadNumber);
  EXPECT_EQ(r.error.offset, 6u);
  EXPECT_EQ(r.error.length, 5u);
  p.delimiter = ',';
  r = ParseWith(scalar, "1,,2\n", p);
  EXPECT_EQ(r.error.kind, ErrorKind::kEmptyField);
  r = ParseWith(scalar, " 1 , 2 \n", p);
  EXPECT_EQ(r.error.kind, ErrorKind::kNone);
  r = ParseWith(scalar, "1 2,3\n", p);
  EXPECT_EQ(r.error.kind, ErrorKind::kBadNumber);
}

TEST(ScalarKernel, KeyedRowsKeepTokensAndRejectBadUtf8) {
  ParseKernel scalar{"scalar", &ParseChunkScalar};
  ParseParams p;
  p.layout = Layout::kKeyed;
  p.dim = 2;
  ChunkResult r = ParseWith(scalar, "caf\xc3\xa9 1 2 \n#tag 3 4\n", p);
  ASSERT_EQ(r.error.kind, ErrorKind::kNone);
  EXPECT_EQ(r.keys, "caf\xc3\xa9#tag");
  EXPECT_EQ(r.key_ends, (std::vector<std::uint32_t>{5, 9}));
  r = ParseWith(scalar, "ok 1 2\nbad\xc3( 3 4\n", p);
  EXPECT_EQ(r.error.kind, ErrorKind::kBadKeyUtf8);
  EXPECT_EQ(r.error.offset, 10u);
}

TEST(Utf8, RejectsOverlongsSurrogatesAndTruncation) {
  std::size_t bad = 0;
  EXPECT_TRUE(ValidUtf8("h\xc3\xa9llo \xf0\x9f\x98\x80", &bad));
  EXPECT_FALSE(ValidUtf8("\xc0\xaf", &bad));      // overlong '/'
  EXPECT_FALSE(ValidUtf8("\xed\xa0\x80", &bad));  // surrogate
  EXPECT_FALSE(ValidUtf8("ab\xe2\x82", &bad));    // truncated
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(ValidUtf8("\xf4\x90\x80\x80", &bad));  // past U+10FFFF
}

}  // namespace
}  // namespace embstore::convert
