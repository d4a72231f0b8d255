#include "embstore/store/simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

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

}  // namespace
}  // namespace embstore::store::simd
