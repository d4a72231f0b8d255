#include "crc.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#elif defined(__aarch64__)
#include <arm_acle.h>
#include <sys/auxv.h>
#endif

namespace embstore::objstore::internal {
namespace {

constexpr std::uint32_t kCastagnoli = 0x82F63B78;  // reflected

constexpr std::array<std::uint32_t, 256> MakeTable() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kCastagnoli : 0);
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kTable = MakeTable();

std::uint32_t UpdatePortable(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) crc = kTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
// The SSE4.2 CRC32 instruction computes CRC-32C (it has no other polynomial). One dependent chain
// of 8-byte steps: about 8 bytes per 3 cycles, some GB/s, far more than a network delivers.
__attribute__((target("sse4.2"))) std::uint32_t UpdateHardware(std::uint32_t crc,
                                                               const unsigned char* p,
                                                               std::size_t n) {
  std::uint64_t c = crc;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
  }
  std::uint32_t c32 = static_cast<std::uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

// Four equal pieces of `len` bytes, `stride` apart, one chain each.
__attribute__((target("sse4.2"))) void Update4Hardware(const unsigned char* p, std::size_t stride,
                                                       std::size_t len, std::uint32_t* crc) {
  std::uint64_t c0 = ~0u, c1 = ~0u, c2 = ~0u, c3 = ~0u;
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t v0, v1, v2, v3;
    std::memcpy(&v0, p + i, 8);
    std::memcpy(&v1, p + stride + i, 8);
    std::memcpy(&v2, p + 2 * stride + i, 8);
    std::memcpy(&v3, p + 3 * stride + i, 8);
    c0 = _mm_crc32_u64(c0, v0);
    c1 = _mm_crc32_u64(c1, v1);
    c2 = _mm_crc32_u64(c2, v2);
    c3 = _mm_crc32_u64(c3, v3);
  }
  crc[0] = ~UpdateHardware(static_cast<std::uint32_t>(c0), p + i, len - i);
  crc[1] = ~UpdateHardware(static_cast<std::uint32_t>(c1), p + stride + i, len - i);
  crc[2] = ~UpdateHardware(static_cast<std::uint32_t>(c2), p + 2 * stride + i, len - i);
  crc[3] = ~UpdateHardware(static_cast<std::uint32_t>(c3), p + 3 * stride + i, len - i);
}

bool DetectHardware() {
  unsigned eax, ebx, ecx, edx;
  // CPUID leaf 1, ECX bit 20: SSE4.2 (read directly: see store/src/simd.cc on why not the
  // compiler's __builtin_cpu_supports).
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 20)) != 0;
}
#elif defined(__aarch64__)
__attribute__((target("+crc"))) std::uint32_t UpdateHardware(std::uint32_t crc,
                                                             const unsigned char* p,
                                                             std::size_t n) {
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    crc = __crc32cd(crc, v);
  }
  for (; n > 0; --n, ++p) crc = __crc32cb(crc, *p);
  return crc;
}

__attribute__((target("+crc"))) void Update4Hardware(const unsigned char* p, std::size_t stride,
                                                     std::size_t len, std::uint32_t* crc) {
  std::uint32_t c0 = ~0u, c1 = ~0u, c2 = ~0u, c3 = ~0u;
  std::size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    std::uint64_t v0, v1, v2, v3;
    std::memcpy(&v0, p + i, 8);
    std::memcpy(&v1, p + stride + i, 8);
    std::memcpy(&v2, p + 2 * stride + i, 8);
    std::memcpy(&v3, p + 3 * stride + i, 8);
    c0 = __crc32cd(c0, v0);
    c1 = __crc32cd(c1, v1);
    c2 = __crc32cd(c2, v2);
    c3 = __crc32cd(c3, v3);
  }
  crc[0] = ~UpdateHardware(c0, p + i, len - i);
  crc[1] = ~UpdateHardware(c1, p + stride + i, len - i);
  crc[2] = ~UpdateHardware(c2, p + 2 * stride + i, len - i);
  crc[3] = ~UpdateHardware(c3, p + 3 * stride + i, len - i);
}

bool DetectHardware() {
  constexpr unsigned long kHwcapCrc32 = 1ul << 7;  // HWCAP_CRC32 in <asm/hwcap.h>
  return (getauxval(AT_HWCAP) & kHwcapCrc32) != 0;
}
#else
std::uint32_t UpdateHardware(std::uint32_t crc, const unsigned char* p, std::size_t n) {
  return UpdatePortable(crc, p, n);
}
void Update4Hardware(const unsigned char* p, std::size_t stride, std::size_t len,
                     std::uint32_t* crc) {
  for (int k = 0; k < 4; ++k) crc[k] = ~UpdatePortable(~0u, p + k * stride, len);
}
bool DetectHardware() { return false; }
#endif

const bool kHardware = DetectHardware();

}  // namespace

std::uint32_t Crc32c(std::span<const std::byte> data) {
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  return ~(kHardware ? UpdateHardware(~0u, p, data.size()) : UpdatePortable(~0u, p, data.size()));
}

void Crc32cChunks(std::span<const std::byte> data, std::size_t chunk,
                  std::span<std::uint32_t> out) {
  std::size_t i = 0;
  if (kHardware) {
    const auto* p = reinterpret_cast<const unsigned char*>(data.data());
    for (; (i + 4) * chunk <= data.size() && i + 4 <= out.size(); i += 4) {
      Update4Hardware(p + i * chunk, chunk, chunk, &out[i]);
    }
  }
  for (; i < out.size(); ++i) {
    const std::size_t b = i * chunk;
    out[i] = Crc32c(data.subspan(b, std::min(chunk, data.size() - b)));
  }
}

std::uint32_t Crc32cPortable(std::span<const std::byte> data) {
  return ~UpdatePortable(~0u, reinterpret_cast<const unsigned char*>(data.data()), data.size());
}

bool Crc32cUsesHardware() { return kHardware; }

std::uint32_t Crc32(std::span<const std::byte> data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = reinterpret_cast<const Bytef*>(data.data());
  std::size_t n = data.size();
  while (n > 0) {  // zlib takes uInt lengths
    const uInt step = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    crc = crc32(crc, p, step);
    p += step;
    n -= step;
  }
  return static_cast<std::uint32_t>(crc);
}

}  // namespace embstore::objstore::internal
