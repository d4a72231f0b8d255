#include "kernel_common.h"

#include <cstdlib>
#include <string_view>

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

constexpr Kernel kScalar{"scalar", &ParseChunkScalar};
constexpr Kernel kAvx2{"avx2", &ParseChunkAvx2};
constexpr Kernel kAvx512{"avx512", &ParseChunkAvx512};

bool CpuHasAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2"); }
bool CpuHasAvx512() {
  return CpuHasAvx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

const Kernel& PickKernel() {
  const char* forced = std::getenv("EMBSTORE_FORCE_KERNEL");
  std::string_view f = forced != nullptr ? forced : "";
  if (f == "scalar") return kScalar;
  if (f == "avx2" && CpuHasAvx2()) return kAvx2;
  if (f == "avx512" && CpuHasAvx512()) return kAvx512;
  // An unknown or unsupported name falls back to the best kernel: forcing is a testing aid and
  // must never select code the CPU cannot run.
  if (CpuHasAvx512()) return kAvx512;
  if (CpuHasAvx2()) return kAvx2;
  return kScalar;
}

}  // namespace

const Kernel& ActiveKernel() {
  static const Kernel& k = PickKernel();
  return k;
}

std::vector<const Kernel*> SupportedKernels() {
  std::vector<const Kernel*> v{&kScalar};
  if (CpuHasAvx2()) v.push_back(&kAvx2);
  if (CpuHasAvx512()) v.push_back(&kAvx512);
  return v;
}

}  // namespace embstore::convert
