#include "embstore/store/simd.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace embstore::store::simd {
namespace {

TEST(Simd, NamesRoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    EXPECT_EQ(ParseIsa(IsaName(isa)), isa);
  }
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
  const std::string line = DescribeActiveIsa();
  EXPECT_EQ(line.rfind("simd: " + std::string(IsaName(ActiveIsa())) + " (", 0), 0u) << line;
}

}  // namespace
}  // namespace embstore::store::simd
