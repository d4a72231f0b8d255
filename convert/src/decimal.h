// Decimal tokens and their correctly rounded encodings (private to the converter).
//
// The grammar is the one np.loadtxt accepts for floats (Python's float syntax without
// underscores): [+-] then digits with an optional '.', or '.' then digits, then an optional
// exponent [eE][+-]digits; or inf, infinity, nan in any case with an optional sign. Hex floats,
// '1_000', '1.5d0', a lone '.', 'nan(...)' are not numbers.
//
// Scanning yields a Decimal: value = (-1)^negative * w * 10^q, exact when !truncated. The Encode*
// functions round it once to the target type (ties to even). Those are the scalar reference; the
// SIMD kernels only find and convert digit runs faster and hand the same Decimal over.
#ifndef EMBSTORE_CONVERT_SRC_DECIMAL_H_
#define EMBSTORE_CONVERT_SRC_DECIMAL_H_

#include <cstdint>
#include <string_view>

#include "embstore/store/dtype.h"

namespace embstore::convert {

using store::DType;

enum class NumberKind : std::uint8_t { kFinite, kInf, kNan };

struct Decimal {
  std::uint64_t w = 0;   // significant digits (up to 19)
  std::int64_t q = 0;    // decimal exponent
  bool negative = false;
  bool truncated = false;  // more than 19 significant digits: re-parse the text exactly
  NumberKind kind = NumberKind::kFinite;
};

// Encoded bits of one value: low 32 bits for F32, low 16 for F16/BF16. `overflow` is set when a
// finite decimal rounds to infinity in the target type (the bits then hold +/-inf).
struct Encoded {
  std::uint32_t bits = 0;
  bool overflow = false;
};

// Scans a number at `p` (no leading whitespace). Returns the end of the longest prefix that is a
// number and fills `out`, or nullptr when no prefix of [p, end) is a number. The caller decides
// whether the character after it may end a field.
const char* ScanNumber(const char* p, const char* end, Decimal* out);

// Parses up to 64 exponent digits at p, saturating; returns the end.
const char* ScanExponentDigits(const char* p, const char* end, std::int64_t* value);

// Builds w/q/truncated from an integer digit run [ip, ip+ni) and fraction run [fp, fp+nf), both
// made only of digits, and an exponent already parsed. Scalar conversion.
void DecimalFromRuns(const char* ip, int ni, const char* fp, int nf, std::int64_t exp10,
                     Decimal* out);

// `text` is the whole token (sign included); it is re-read only in rare cases (more than 19
// digits, or a value that lands exactly on a halfway point of the target type).
Encoded EncodeF32(const Decimal& d, std::string_view text);
Encoded EncodeF16(const Decimal& d, std::string_view text);
Encoded EncodeBF16(const Decimal& d, std::string_view text);
inline Encoded Encode(DType t, const Decimal& d, std::string_view text) {
  switch (t) {
    case DType::kF16: return EncodeF16(d, text);
    case DType::kBF16: return EncodeBF16(d, text);
    default: return EncodeF32(d, text);
  }
}

// Rounds a double to a 16-bit binary format with `precision` significand bits (11 for F16, 8 for
// BF16) and `bias` (15, 127), ties to even. When `d` lies exactly halfway between two neighbours,
// `halfway_dir` breaks the tie: > 0 rounds away from zero, < 0 towards zero, 0 to even (the
// caller knows whether the decimal was above, below or exactly at d). Exposed for tests.
Encoded RoundDoubleToSmall(double d, int precision, int bias, int halfway_dir);
// True when |d| lies exactly halfway between two neighbours of that format (or halfway between
// the largest finite value and the next power of two).
bool IsSmallHalfway(double d, int precision, int bias);

// Exact comparison of the decimal in `text` (a valid finite number token) with |d|:
// -1 when |text| < |d|, 0 when equal, +1 when greater. Slow; for halfway cases only.
int CompareDecimalWithDouble(std::string_view text, double d);

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_DECIMAL_H_
