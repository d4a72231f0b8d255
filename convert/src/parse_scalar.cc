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
    return set.FindIn(p, end);
  }
};

}  // namespace

void ParseChunkScalar(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<ScalarIsa>(text, params, out);
}

}  // namespace embstore::convert
