#include "embstore/store/simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace embstore::store::simd {
namespace {

TEST(Simd, NamesRoundTrip) {
  for (Isa isa : kAllIsas) {
    EXPECT_EQ(ParseIsa(IsaName(isa)), isa);
  }
  EXPECT_EQ(ParseIsa("neon"), Isa::kNeon);
  EXPECT_FALSE(ParseIsa("AVX2").has_value());
  EXPECT_FALSE(ParseIsa("").has_value());
  EXPECT_FALSE(ParseIsa("sse").has_value());
}

TEST(Simd, ActiveLevelIsSupportedAndDescribed) {
  const std::vector<Isa> supported = SupportedIsas();
  ASSERT_FALSE(supported.empty());
  EXPECT_EQ(supported.front(), Isa::kScalar);
  EXPECT_TRUE(std::is_sorted(supported.begin(), supported.end()));
  for (Isa isa : supported) EXPECT_TRUE(CpuSupports(isa));
  EXPECT_TRUE(CpuSupports(ActiveIsa()));
  // AVX-512 kernels also use the AVX2 level's instructions.
  if (CpuSupports(Isa::kAvx512)) {
    EXPECT_TRUE(CpuSupports(Isa::kAvx2));
  }
  // Each build runs only its own architecture's levels, and always its SIMD one on aarch64.
#if defined(__aarch64__)
  EXPECT_TRUE(CpuSupports(Isa::kNeon));
  EXPECT_EQ(ActiveIsa() == Isa::kNeon || std::getenv("EMBSTORE_FORCE_KERNEL") != nullptr, true);
  EXPECT_FALSE(CpuSupports(Isa::kAvx2));
#else
  EXPECT_FALSE(CpuSupports(Isa::kNeon));
#endif
  const std::string line = DescribeActiveIsa();
  EXPECT_EQ(line.rfind("simd: " + std::string(IsaName(ActiveIsa())) + " (", 0), 0u) << line;
}

#if defined(__x86_64__)
// The probe against the kernel's own reading of CPUID: Linux lists a feature in /proc/cpuinfo
// only when the CPU has it and the OS saves its registers, the two things the probe checks.
TEST(Simd, ProbeAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::set<std::string> flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  ASSERT_FALSE(flags.empty()) << "no flags line in /proc/cpuinfo";
  auto has = [&](std::initializer_list<const char*> names) {
    return std::all_of(names.begin(), names.end(), [&](const char* n) { return flags.count(n); });
  };
  const bool avx2 = has({"avx2", "fma", "f16c", "bmi1", "bmi2"});
  EXPECT_EQ(CpuSupports(Isa::kAvx2), avx2);
  EXPECT_EQ(CpuSupports(Isa::kAvx512), avx2 && has({"avx512f", "avx512bw", "avx512vl", "avx512dq"}));
}
#endif

}  // namespace
}  // namespace embstore::store::simd
