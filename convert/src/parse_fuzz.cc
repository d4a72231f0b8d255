// libFuzzer target for the converter's parser (built with EMBSTORE_BUILD_FUZZ=ON and clang; see
// docs/CONVERT.md, "Fuzzing").
//
// The first input byte picks the parse parameters (layout, delimiter, dtype, dim, comments); the
// rest is the text. Every kernel this CPU supports parses it, and all must agree with the scalar
// reference byte for byte (values, keys, error kind and position). When the whole text is one
// number token, its f32 encoding must equal strtof(). Sanitizers catch out-of-bounds reads of the
// SIMD loads, which is why the text sits in an exactly sized heap buffer with padding on both
// sides that only the readable range covers.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "embstore/convert/parse_kernels.h"
#include "decimal.h"

namespace {

using namespace embstore::convert;

bool Same(const ChunkResult& a, const ChunkResult& b) {
  return a.error.kind == b.error.kind && a.error.line == b.error.line &&
         a.error.line_begin == b.error.line_begin && a.error.offset == b.error.offset &&
         a.error.length == b.error.length && a.error.found == b.error.found && a.rows == b.rows &&
         a.lines == b.lines && a.values == b.values && a.keys == b.keys &&
         a.key_ends == b.key_ends && a.row_line == b.row_line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t sel = data[0];
  ParseParams p;
  p.layout = (sel & 1) ? Layout::kKeyed : Layout::kMatrix;
  p.delimiter = (p.layout == Layout::kMatrix && (sel & 2)) ? ',' : '\0';
  p.dtype = static_cast<DType>((sel >> 2) % 3);
  // Dims of 8 and more reach the kernels' eight-token paths and their one-at-a-time tails.
  static constexpr std::uint32_t kDims[] = {1, 2, 3, 4, 8, 9, 16, 17};
  p.dim = kDims[(sel >> 4) & 7];
  p.comments = (sel & 0x80) ? "//" : "#";
  p.overflow_is_error = (sel & 0x40) != 0;
  const std::size_t n = size - 1;
  constexpr std::size_t kPad = 128;
  std::vector<char> buf(kPad + n + kPad, '5');
  std::memcpy(buf.data() + kPad, data + 1, n);
  ChunkText text{buf.data() + kPad, buf.data() + kPad + n, buf.data(), buf.data() + buf.size()};

  ChunkResult ref;
  ParseChunkScalar(text, p, &ref);
  for (const ParseKernel* k : SupportedParseKernels()) {
    ChunkResult r;
    k->parse(text, p, &r);
    if (!Same(ref, r)) std::abort();
  }
  // Exactly sized, unpadded: a kernel may not read past the readable range.
  std::vector<char> tight(data + 1, data + size);
  ChunkText tight_text{tight.data(), tight.data() + n, tight.data(), tight.data() + n};
  for (const ParseKernel* k : SupportedParseKernels()) {
    ChunkResult r;
    k->parse(tight_text, p, &r);
    if (!Same(ref, r)) std::abort();
  }

  // A whole-input number token: f32 must equal strtof (glibc is correctly rounded).
  Decimal d;
  const char* first = reinterpret_cast<const char*>(data + 1);
  const char* end = ScanNumber(first, first + n, &d);
  if (end == first + n && n < 4096) {
    std::string s(first, n);
    Encoded e = EncodeF32(d, s);
    float f = std::strtof(s.c_str(), nullptr);
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (d.kind == NumberKind::kNan) bits = (bits & 0x80000000u) | 0x7fc00000u;
    if (e.bits != bits) std::abort();
  }
  return 0;
}
