#include "embstore/store/simd.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace embstore::store::simd {
namespace {

#if defined(__x86_64__)
// F16C is CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c"; the
// OS check for the AVX state it needs is part of the "avx2" test below).
bool HasF16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

bool Probe(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && HasF16c();
    case Isa::kAvx512:
      return Probe(Isa::kAvx2) && __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
    case Isa::kNeon:
      return false;
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
