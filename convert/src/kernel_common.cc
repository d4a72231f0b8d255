#include "kernel_common.h"

#include "embstore/store/simd.h"

namespace embstore::convert {

std::byte* AppendRow(ChunkResult* out, std::size_t bytes) {
  std::size_t old = out->values.size();
  out->values.resize(old + bytes);
  return out->values.data() + old;
}

void TruncateRows(ChunkResult* out, std::uint64_t rows, std::size_t row_bytes) {
  out->values.resize(static_cast<std::size_t>(rows) * row_bytes);
}

void PushKey(ChunkResult* out, const char* key, std::size_t len, std::uint32_t line) {
  out->keys.append(key, len);
  out->key_ends.push_back(static_cast<std::uint32_t>(out->keys.size()));
  out->row_line.push_back(line);
}

bool ValidUtf8(std::string_view s, std::size_t* bad_offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      *bad_offset = i;
      return false;
    }
    if (i + len > n) {
      *bad_offset = i;
      return false;
    }
    for (std::size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) {
        *bad_offset = i;
        return false;
      }
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

namespace {

constexpr ParseKernel kScalar{"scalar", &ParseChunkScalar};
#if defined(__x86_64__)
constexpr ParseKernel kAvx2{"avx2", &ParseChunkAvx2};
constexpr ParseKernel kAvx512{"avx512", &ParseChunkAvx512};
#elif defined(__aarch64__)
constexpr ParseKernel kNeon{"neon", &ParseChunkNeon};
#endif

const ParseKernel& KernelFor(store::simd::Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case store::simd::Isa::kAvx512: return kAvx512;
    case store::simd::Isa::kAvx2: return kAvx2;
#elif defined(__aarch64__)
    case store::simd::Isa::kNeon: return kNeon;
#endif
    default: break;
  }
  return kScalar;
}

}  // namespace

const ParseKernel& ActiveParseKernel() {
  static const ParseKernel& k = KernelFor(store::simd::ActiveIsa());
  return k;
}

std::vector<const ParseKernel*> SupportedParseKernels() {
  std::vector<const ParseKernel*> v;
  for (store::simd::Isa isa : store::simd::SupportedIsas()) v.push_back(&KernelFor(isa));
  return v;
}

}  // namespace embstore::convert
