// Private: the per-ISA kernels behind dtype.h's span conversions and checksum.h's Checksum64.
//
// dtype_kernels_impl.h holds the generic code once; dtype_kernels_avx2.cc and
// dtype_kernels_avx512.cc (x86-64 builds) and dtype_kernels_neon.cc (aarch64 builds) compile it
// with their ISA flags in their own namespaces, and dtype.cc
// compiles it without extra flags as the scalar reference. dtype.cc picks one table of kernels
// per process.
#ifndef EMBSTORE_STORE_DTYPE_KERNELS_H_
#define EMBSTORE_STORE_DTYPE_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "embstore/store/simd.h"

namespace embstore::store::kernels {

// Magnitudes (f32 bits without the sign) from which a finite f32 rounds to infinity: 65520,
// halfway past binary16's largest 65504; and halfway past bfloat16's largest.
constexpr std::uint32_t kF16OverflowBits = 0x477FF000u;
constexpr std::uint32_t kBF16OverflowBits = 0x7F7F8000u;

// The checked conversions (ConvertFromF32 with OverflowPolicy::kError) test for overflow once per
// block of this many values (16 KiB of f32, still in L1 or L2 for the rare second look).
constexpr std::size_t kCheckBlock = 4096;

struct DTypeKernels {
  const char* name;
  void (*f16_to_f32)(const std::uint16_t* src, float* dst, std::size_t n);
  void (*bf16_to_f32)(const std::uint16_t* src, float* dst, std::size_t n);
  void (*f32_to_f16)(const float* src, std::uint16_t* dst, std::size_t n);
  void (*f32_to_bf16)(const float* src, std::uint16_t* dst, std::size_t n);
  // f32_to_f16 and f32_to_bf16 that also look for a finite value too large for the type (one
  // that rounds to infinity): they return the index of the first, dst then written at least up to
  // it, or n when there is none.
  std::size_t (*f32_to_f16_checked)(const float* src, std::uint16_t* dst, std::size_t n);
  std::size_t (*f32_to_bf16_checked)(const float* src, std::uint16_t* dst, std::size_t n);
  // XXH3-64 with seed 0 (checksum.h's Checksum64), the same value at every level.
  std::uint64_t (*checksum64)(const void* data, std::size_t n);
};

const DTypeKernels& ScalarKernels();
const DTypeKernels& Avx2Kernels();    // requires AVX2 + F16C + FMA
const DTypeKernels& Avx512Kernels();  // requires AVX-512 F/BW/VL/DQ
const DTypeKernels& NeonKernels();    // aarch64 builds only

// The kernels of one level (precondition: simd::CpuSupports(isa)), and those of simd::ActiveIsa(),
// which dtype.h's conversions use.
const DTypeKernels& KernelsFor(simd::Isa isa);
const DTypeKernels& ActiveKernels();

}  // namespace embstore::store::kernels

#endif  // EMBSTORE_STORE_DTYPE_KERNELS_H_
