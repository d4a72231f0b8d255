// The NEON kernel (aarch64): 16-byte blocks for the scans, 32 bytes (two loads) for the digit
// runs of one number, so np.savetxt's '%.18e' tokens stay on the SIMD path. Advanced SIMD is the
// aarch64 baseline: no extra flags, and every aarch64 CPU runs it (store/simd.h).
#include <arm_neon.h>

#include "simd_isa.h"

namespace embstore::convert {
namespace {

// NEON has no movemask: keep one weight bit per byte (1, 2, ..., 128 in each half), then add the
// eight bytes of each half across (they are distinct bits, so the sum is their OR).
inline std::uint32_t MoveMask(uint8x16_t lanes) {
  alignas(16) static constexpr std::uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128,
                                                        1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t m = vandq_u8(lanes, vld1q_u8(kBit));
  return static_cast<std::uint32_t>(vaddv_u8(vget_low_u8(m))) |
         (static_cast<std::uint32_t>(vaddv_u8(vget_high_u8(m))) << 8);
}

template <>
std::uint32_t ToMask<xsimd::neon64, std::uint32_t>(
    const xsimd::batch_bool<std::int8_t, xsimd::neon64>& b) {
  return MoveMask(static_cast<uint8x16_t>(b));  // all-ones or all-zeros bytes
}

struct NeonIsa : SimdIsa<xsimd::neon64> {
  static constexpr int kWidth = 32;
  using Mask = std::uint32_t;

  // SimdIsa::DigitMask over 32 bytes: bit i = ('0' <= p[i] && p[i] <= '9').
  static Mask DigitMask(const char* p) {
    const auto* u = reinterpret_cast<const std::uint8_t*>(p);
    const uint8x16_t zero = vdupq_n_u8('0');
    const uint8x16_t nine = vdupq_n_u8(9);
    // Unsigned p[i] - '0' <= 9 exactly for the ten digits.
    const uint8x16_t lo = vcleq_u8(vsubq_u8(vld1q_u8(u), zero), nine);
    const uint8x16_t hi = vcleq_u8(vsubq_u8(vld1q_u8(u + 16), zero), nine);
    return MoveMask(lo) | (MoveMask(hi) << 16);
  }

  // SimdIsa::Digits16 (the value of the n digits that end at `last`) with NEON's widening
  // pairwise adds: digit pairs d0*10 + d1 into 16-bit lanes, then 4- and 8-digit groups into 32-
  // and 64-bit lanes; the two 8-digit halves give hi * 10^8 + lo.
  static std::uint64_t Digits16(const char* last, int n) {
    alignas(16) static constexpr std::int8_t kLane[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                          8, 9, 10, 11, 12, 13, 14, 15};
    alignas(16) static constexpr std::uint8_t kW10[16] = {10, 1, 10, 1, 10, 1, 10, 1,
                                                          10, 1, 10, 1, 10, 1, 10, 1};
    alignas(16) static constexpr std::uint16_t kW100[8] = {100, 1, 100, 1, 100, 1, 100, 1};
    alignas(16) static constexpr std::uint32_t kW10000[4] = {10000, 1, 10000, 1};
    uint8x16_t v = vsubq_u8(vld1q_u8(reinterpret_cast<const std::uint8_t*>(last - 16)),
                            vdupq_n_u8('0'));
    const uint8x16_t keep =
        vcgeq_s8(vld1q_s8(kLane), vdupq_n_s8(static_cast<std::int8_t>(16 - n)));
    v = vandq_u8(v, keep);
    const uint16x8_t two = vpaddlq_u8(vmulq_u8(v, vld1q_u8(kW10)));
    const uint32x4_t four = vpaddlq_u16(vmulq_u16(two, vld1q_u16(kW100)));
    const uint64x2_t eight = vpaddlq_u32(vmulq_u32(four, vld1q_u32(kW10000)));
    return vgetq_lane_u64(eight, 0) * 100000000ull + vgetq_lane_u64(eight, 1);
  }
};

}  // namespace

void ParseChunkNeon(const ChunkText& text, const ParseParams& params, ChunkResult* out) {
  ParseChunkWith<NeonIsa>(text, params, out);
}

}  // namespace embstore::convert
