#include "embstore/store/simd.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace embstore::store::simd {
namespace {

#if defined(__x86_64__)
// Read from CPUID and XGETBV here rather than through __builtin_cpu_supports: that builtin reads
// a table the compiler's runtime library fills in, and not every toolchain's does (zig's
// compiler-rt, which the portable wheels link, leaves it zero, so every level would read as
// unsupported and the wheels would run scalar code).
struct X86Features {
  bool avx2 = false;    // AVX2, FMA, F16C, BMI1, BMI2, and the OS saves the YMM state
  bool avx512 = false;  // AVX-512 F, BW, VL, DQ, and the OS saves the opmask and ZMM state
};

uint64_t Xgetbv0() {
  uint32_t lo, hi;
  // XGETBV with ECX = 0 reads XCR0: which register states the OS saves on a context switch.
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

X86Features ReadX86Features() {
  X86Features f;
  unsigned eax, ebx, ecx, edx;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return f;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28),
             f16c = ecx & (1u << 29);
  if (!osxsave || !avx) return f;  // XGETBV exists only with OSXSAVE
  const uint64_t xcr0 = Xgetbv0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6;     // SSE and AVX state
  const bool zmm_state = (xcr0 & 0xe6) == 0xe6;   // and opmask, ZMM0-15 upper, ZMM16-31
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool bmi1 = ebx & (1u << 3), avx2 = ebx & (1u << 5), bmi2 = ebx & (1u << 8),
             avx512f = ebx & (1u << 16), avx512dq = ebx & (1u << 17),
             avx512bw = ebx & (1u << 30), avx512vl = ebx & (1u << 31);
  f.avx2 = ymm_state && avx2 && fma && f16c && bmi1 && bmi2;
  f.avx512 = f.avx2 && zmm_state && avx512f && avx512bw && avx512vl && avx512dq;
  return f;
}

bool Probe(Isa isa) {
  static const X86Features features = ReadX86Features();
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kAvx2: return features.avx2;
    case Isa::kAvx512: return features.avx512;
    case Isa::kNeon: return false;
  }
  return false;
}
#elif defined(__aarch64__)
// Advanced SIMD and its half-precision conversions are part of ARMv8-A: every aarch64 CPU that
// Linux runs on has them (the compiler uses them at the baseline, -march=armv8-a).
bool Probe(Isa isa) { return isa == Isa::kScalar || isa == Isa::kNeon; }
#else
bool Probe(Isa isa) { return isa == Isa::kScalar; }
#endif

struct Choice {
  Isa isa = Isa::kScalar;
  std::string why;
};

Choice Choose() {
  Isa best = Isa::kScalar;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {  // worst to best per architecture
    if (Probe(isa)) best = isa;
  }
  const char* forced = std::getenv("EMBSTORE_FORCE_KERNEL");
  if (forced == nullptr || *forced == '\0') return {best, "the best this CPU runs"};
  const std::string value = forced;
  std::optional<Isa> want = ParseIsa(value);
  if (want && Probe(*want)) return {*want, "forced by EMBSTORE_FORCE_KERNEL=" + value};
  std::string why = want ? "EMBSTORE_FORCE_KERNEL=" + value + " is not supported by this CPU"
                         : "EMBSTORE_FORCE_KERNEL=" + value +
                               " is not one of scalar, avx2, avx512, neon";
  std::fprintf(stderr, "embstore: warning: %s; using %s\n", why.c_str(),
               std::string(IsaName(best)).c_str());
  return {best, why};
}

const Choice& Chosen() {
  static const Choice c = Choose();
  return c;
}

}  // namespace

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
    case Isa::kNeon: return "neon";
  }
  return "?";
}

std::optional<Isa> ParseIsa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (name == IsaName(isa)) return isa;
  }
  return std::nullopt;
}

bool CpuSupports(Isa isa) {
  static const bool supported[] = {Probe(Isa::kScalar), Probe(Isa::kAvx2), Probe(Isa::kAvx512),
                                   Probe(Isa::kNeon)};
  const auto i = static_cast<std::size_t>(isa);
  return i < std::size(supported) && supported[i];
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : kAllIsas) {
    if (CpuSupports(isa)) out.push_back(isa);
  }
  return out;
}

Isa ActiveIsa() { return Chosen().isa; }

std::string DescribeActiveIsa() {
  return "simd: " + std::string(IsaName(Chosen().isa)) + " (" + Chosen().why + ")";
}

}  // namespace embstore::store::simd
