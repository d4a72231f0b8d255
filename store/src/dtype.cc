#include "embstore/store/dtype.h"

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
                                 scalar::F32ToBf16, scalar::F32ToF16Checked,
                                 scalar::F32ToBf16Checked, scalar::Checksum64};
  return k;
}

const DTypeKernels& KernelsFor(simd::Isa isa) {
  switch (isa) {
#if defined(__x86_64__)
    case simd::Isa::kAvx512: return Avx512Kernels();
    case simd::Isa::kAvx2: return Avx2Kernels();
#elif defined(__aarch64__)
    case simd::Isa::kNeon: return NeonKernels();
#endif
    default: break;
  }
  return ScalarKernels();
}

const DTypeKernels& ActiveKernels() {
  static const DTypeKernels& k = KernelsFor(simd::ActiveIsa());
  return k;
}

}  // namespace kernels

using kernels::kBF16OverflowBits;
using kernels::kF16OverflowBits;

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

namespace {

void ConvertToF32With(const kernels::DTypeKernels& k, DType t, std::span<const std::byte> src,
                      std::span<float> dst) {
  if (dst.empty()) return;  // an empty span may carry a null pointer, which memcpy must not get
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

std::optional<std::size_t> ConvertFromF32With(const kernels::DTypeKernels& k, DType t,
                                              std::span<const float> src, std::span<std::byte> dst,
                                              OverflowPolicy policy) {
  if (src.empty()) return std::nullopt;
  if (policy == OverflowPolicy::kError && t != DType::kF32) {
    // The check rides along with the conversion: one pass over src.
    auto* out = reinterpret_cast<std::uint16_t*>(dst.data());
    const std::size_t at = t == DType::kF16 ? k.f32_to_f16_checked(src.data(), out, src.size())
                                            : k.f32_to_bf16_checked(src.data(), out, src.size());
    if (at < src.size()) return at;
    return std::nullopt;
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

}  // namespace

void ConvertToF32(DType t, std::span<const std::byte> src, std::span<float> dst) {
  ConvertToF32With(kernels::ActiveKernels(), t, src, dst);
}

std::optional<std::size_t> ConvertFromF32(DType t, std::span<const float> src,
                                          std::span<std::byte> dst, OverflowPolicy policy) {
  return ConvertFromF32With(kernels::ActiveKernels(), t, src, dst, policy);
}

void ConvertToF32On(simd::Isa isa, DType t, std::span<const std::byte> src,
                    std::span<float> dst) {
  ConvertToF32With(kernels::KernelsFor(isa), t, src, dst);
}

std::optional<std::size_t> ConvertFromF32On(simd::Isa isa, DType t, std::span<const float> src,
                                            std::span<std::byte> dst, OverflowPolicy policy) {
  return ConvertFromF32With(kernels::KernelsFor(isa), t, src, dst, policy);
}

}  // namespace embstore::store
