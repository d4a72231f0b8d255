// The one CPU-feature probe: which SIMD instruction set (ISA) the kernels of this process use.
//
// Every SIMD kernel in embstore (the dtype conversions here, the converter's parse kernels) is
// built for one of these levels, and all of them dispatch through ActiveIsa():
//   scalar   baseline x86-64 or ARMv8-A, the reference every other level is tested against
//   avx2     x86-64: AVX2 + FMA + F16C + BMI1 + BMI2 (Haswell and later, Zen)
//   avx512   x86-64: the avx2 level + AVX-512 F, BW, VL and DQ (Skylake-SP and later, Zen 4)
//   neon     aarch64: Advanced SIMD (NEON) with half-precision conversions, which every
//            ARMv8-A CPU has (Graviton, Grace, Ampere, Apple)
// A build for one architecture has only its own levels; the others are never supported.
// A level counts as supported only when the CPU has every feature and the OS saves the vector
// registers it needs: simd.cc reads CPUID and XGETBV itself (not __builtin_cpu_supports, whose
// table some toolchains' runtimes never fill in; not xsimd 8's available_architectures(), which
// reads AVX from the wrong CPUID leaf and does not check the OS state, VL, BMI2 or F16C).
//
// The choice: the best supported level, or EMBSTORE_FORCE_KERNEL=scalar|avx2|avx512|neon when
// set and supported. A value that is unknown or that this CPU cannot run prints one warning on
// stderr and the best supported level is used: forcing is a testing aid and must never select
// code the CPU cannot run. The choice is made once per process and is thread-safe.
#ifndef EMBSTORE_STORE_SIMD_H_
#define EMBSTORE_STORE_SIMD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace embstore::store::simd {

enum class Isa : std::uint8_t { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };

// Every level of every architecture, in order.
inline constexpr Isa kAllIsas[] = {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kNeon};

// "scalar", "avx2", "avx512", "neon".
std::string_view IsaName(Isa isa);
std::optional<Isa> ParseIsa(std::string_view name);

// Whether this CPU and OS run code built for `isa` (always true for kScalar).
bool CpuSupports(Isa isa);

// Every supported level, scalar first.
std::vector<Isa> SupportedIsas();

// The level every kernel in this process uses (see above).
Isa ActiveIsa();

// One line for logs: "simd: avx2 (the best this CPU runs)", "simd: scalar (forced by
// EMBSTORE_FORCE_KERNEL=scalar)", "simd: avx2 (EMBSTORE_FORCE_KERNEL=avx512 is not supported
// by this CPU)".
std::string DescribeActiveIsa();

}  // namespace embstore::store::simd

#endif  // EMBSTORE_STORE_SIMD_H_
