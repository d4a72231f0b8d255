// Element types of an embedding matrix and conversions between them.
//
// A table stores F32, F16 (IEEE 754 binary16) or BF16 (bfloat16), little-endian, as docs/FORMAT.md
// says. Conversions to f32 are exact. Conversions from f32 round to nearest, ties to even; values
// beyond the target's finite range either become +/-inf or are reported, as the caller chooses.
//
// The span-wide conversions run the SIMD kernels of simd::ActiveIsa() (store/simd.h: the best
// level the CPU runs, or EMBSTORE_FORCE_KERNEL); the *On variants name a level, for benchmarks
// and tests that compare levels. All functions are thread-safe.
#ifndef EMBSTORE_STORE_DTYPE_H_
#define EMBSTORE_STORE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "embstore/common/status.h"
#include "embstore/store/simd.h"

namespace embstore::store {

enum class DType : std::uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

// Bytes per element: 4, 2, 2.
constexpr std::size_t DTypeSize(DType t) { return t == DType::kF32 ? 4 : 2; }

// The safetensors spelling: "F32", "F16", "BF16".
std::string_view DTypeName(DType t);

// Accepts the safetensors spelling and the lower-case CLI spellings "f32", "float32", "f16",
// "float16", "half", "bf16", "bfloat16". Returns nullopt for anything else.
std::optional<DType> ParseDType(std::string_view s);

// Scalar conversions. The F32 -> 16-bit ones round to nearest even; NaN stays NaN (quiet), and
// finite values past the largest finite 16-bit value become +/-inf.
float F16ToF32(std::uint16_t h);
float BF16ToF32(std::uint16_t b);
std::uint16_t F32ToF16(float f);
std::uint16_t F32ToBF16(float f);

// True when `f` is finite but rounds to infinity in `t` (always false for kF32).
bool OverflowsTo(DType t, float f);

// Converts `src` (elements of type `t`, little-endian, aligned to their size) to f32.
// Precondition: dst.size() == src.size() / DTypeSize(t).
void ConvertToF32(DType t, std::span<const std::byte> src, std::span<float> dst);

// What to do with a finite f32 value that is too large for the target type.
enum class OverflowPolicy { kError, kInfinity };

// Converts `src` to elements of type `t` in `dst` (little-endian).
// Precondition: dst.size() == src.size() * DTypeSize(t).
// With kError, returns the index of the first value that would overflow (finite in f32, infinite
// in `t`) and leaves `dst` partly written; with kInfinity always returns nullopt.
std::optional<std::size_t> ConvertFromF32(DType t, std::span<const float> src,
                                          std::span<std::byte> dst, OverflowPolicy policy);

// ConvertToF32 and ConvertFromF32 with the kernels of `isa`, whatever ActiveIsa() is.
// Precondition: simd::CpuSupports(isa).
void ConvertToF32On(simd::Isa isa, DType t, std::span<const std::byte> src, std::span<float> dst);
std::optional<std::size_t> ConvertFromF32On(simd::Isa isa, DType t, std::span<const float> src,
                                            std::span<std::byte> dst, OverflowPolicy policy);

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_DTYPE_H_
