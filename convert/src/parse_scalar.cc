// The scalar reference kernel: byte loops only. Every SIMD kernel must produce exactly its
// output (parse_kernel_test.cc).
#include "parse_impl.h"

namespace embstore::convert {
namespace {

struct ScalarIsa {
  static constexpr bool kSimd = false;
  static constexpr bool kBatchF32 = false;
  static const char* FindAny(const char* p, const char* end, const char* /*re*/,
                             const CharSet& set) {
    for (; p < end; ++p) {
      char c = *p;
      if (c == set.c[0] || c == set.c[1] || c == set.c[2] || c == set.c[3] || c == set.c[4] ||
          c == set.c[5]) {
        return p;
      }
    }
    return end;
  }
};

}  // namespace

void ParseChunkScalar(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<ScalarIsa>(text, params, out);
}

}  // namespace embstore::convert
