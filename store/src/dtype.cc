#include "embstore/store/dtype.h"

#include <cpuid.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

// The scalar reference: the generic kernels compiled with the baseline flags only.
#define EMBSTORE_KERNEL_NS scalar
#include "dtype_kernels_impl.h"
#undef EMBSTORE_KERNEL_NS

namespace embstore::store {

static_assert(std::endian::native == std::endian::little,
              "embstore maps little-endian table data directly; big-endian hosts are unsupported");

namespace kernels {

const DTypeKernels& ScalarKernels() {
  static const DTypeKernels k = {"scalar", scalar::F16ToF32, scalar::Bf16ToF32, scalar::F32ToF16,
                                 scalar::F32ToBf16, scalar::MaxFiniteMagnitude};
  return k;
}

namespace {

// F16C through CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
bool HasF16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}

}  // namespace

bool CpuRunsAvx2Kernels() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && HasF16c() && __builtin_cpu_supports("fma");
}

bool CpuRunsAvx512Kernels() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

namespace {

const DTypeKernels& Choose() {
  const char* forced = std::getenv("EMBSTORE_FORCE_KERNEL");
  std::string want = forced ? forced : "";
  const bool has_avx512 = CpuRunsAvx512Kernels();
  const bool has_avx2 = CpuRunsAvx2Kernels();
  if (want == "scalar") return ScalarKernels();
  if (want == "avx2" && has_avx2) return Avx2Kernels();
  if (want == "avx512" && has_avx512) return Avx512Kernels();
  if (has_avx512 && want.empty()) return Avx512Kernels();
  if (has_avx2) return Avx2Kernels();
  return ScalarKernels();
}

}  // namespace

const DTypeKernels& ActiveKernels() {
  static const DTypeKernels& k = Choose();
  return k;
}

}  // namespace kernels

namespace {

// Magnitudes (f32 bits without the sign) from which a finite f32 rounds to infinity:
// 65520, halfway past binary16's largest 65504; and halfway past bfloat16's largest.
constexpr std::uint32_t kF16OverflowBits = 0x477FF000u;
constexpr std::uint32_t kBF16OverflowBits = 0x7F7F8000u;

}  // namespace

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view s) {
  if (s == "F32" || s == "f32" || s == "float32" || s == "float") return DType::kF32;
  if (s == "F16" || s == "f16" || s == "float16" || s == "half") return DType::kF16;
  if (s == "BF16" || s == "bf16" || s == "bfloat16") return DType::kBF16;
  return std::nullopt;
}

float F16ToF32(std::uint16_t h) { return kernels::scalar::HalfToFloat(h); }
float BF16ToF32(std::uint16_t b) { return kernels::scalar::FromBits(std::uint32_t{b} << 16); }
std::uint16_t F32ToF16(float f) { return kernels::scalar::FloatToHalf(f); }
std::uint16_t F32ToBF16(float f) {
  std::uint16_t out;
  kernels::scalar::F32ToBf16(&f, &out, 1);
  return out;
}

bool OverflowsTo(DType t, float f) {
  if (!std::isfinite(f)) return false;
  std::uint32_t mag = kernels::scalar::Bits(f) & 0x7FFFFFFFu;
  switch (t) {
    case DType::kF32:
      return false;
    case DType::kF16:
      return mag >= kF16OverflowBits;
    case DType::kBF16:
      return mag >= kBF16OverflowBits;
  }
  return false;
}

void ConvertToF32(DType t, std::span<const std::byte> src, std::span<float> dst) {
  if (dst.empty()) return;  // an empty span may carry a null pointer, which memcpy must not get
  const auto& k = kernels::ActiveKernels();
  switch (t) {
    case DType::kF32:
      std::memcpy(dst.data(), src.data(), dst.size() * 4);
      return;
    case DType::kF16: {
      // Table data is 2-byte aligned in the mapping (the matrix starts on a page boundary).
      k.f16_to_f32(reinterpret_cast<const std::uint16_t*>(src.data()), dst.data(), dst.size());
      return;
    }
    case DType::kBF16:
      k.bf16_to_f32(reinterpret_cast<const std::uint16_t*>(src.data()), dst.data(), dst.size());
      return;
  }
}

std::optional<std::size_t> ConvertFromF32(DType t, std::span<const float> src,
                                          std::span<std::byte> dst, OverflowPolicy policy) {
  if (src.empty()) return std::nullopt;
  const auto& k = kernels::ActiveKernels();
  if (policy == OverflowPolicy::kError && t != DType::kF32) {
    // One vectorized pass finds whether anything overflows; only then look for the first one.
    const std::uint32_t limit = t == DType::kF16 ? kF16OverflowBits : kBF16OverflowBits;
    if (k.max_finite_magnitude(src.data(), src.size()) >= limit) {
      for (std::size_t i = 0; i < src.size(); ++i) {
        if (OverflowsTo(t, src[i])) return i;
      }
    }
  }
  switch (t) {
    case DType::kF32:
      std::memcpy(dst.data(), src.data(), src.size() * 4);
      break;
    case DType::kF16:
      k.f32_to_f16(src.data(), reinterpret_cast<std::uint16_t*>(dst.data()), src.size());
      break;
    case DType::kBF16:
      k.f32_to_bf16(src.data(), reinterpret_cast<std::uint16_t*>(dst.data()), src.size());
      break;
  }
  return std::nullopt;
}

std::string_view ActiveKernelName() { return kernels::ActiveKernels().name; }

}  // namespace embstore::store
