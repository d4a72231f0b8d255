#include "embstore/store/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dtype_kernels.h"
#include "embstore/store/checksum.h"

namespace embstore::store {
namespace {

using kernels::DTypeKernels;

std::uint32_t Bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<const DTypeKernels*> SimdKernels() {
  std::vector<const DTypeKernels*> out;
  for (simd::Isa isa : simd::SupportedIsas()) {
    if (isa != simd::Isa::kScalar) out.push_back(&kernels::KernelsFor(isa));
  }
  return out;
}

// Interesting f32 bit patterns plus random ones: zeros, subnormals, f16/bf16 rounding edges,
// the overflow thresholds, infinities and NaNs with payloads.
std::vector<float> EdgeAndRandomFloats() {
  std::vector<std::uint32_t> bits = {
      0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x33000000, 0x33000001, 0x337FFFFF,
      0x38800000, 0x387FFFFF, 0x387FE000, 0x387FF000, 0x3F800000, 0x3F801000, 0x3F803000,
      0x3F808000, 0x3F818000, 0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x7F7F7FFF,
      0x7F7F8000, 0x7F7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
      0x7FBFFFFF, 0x3F7FFFFF, 0xC77FF000};
  std::vector<float> v;
  for (auto b : bits) v.push_back(FromBits(b));
  std::mt19937 rng(42);
  for (int i = 0; i < 200000; ++i) v.push_back(FromBits(rng()));
  std::normal_distribution<float> normal(0, 100);
  for (int i = 0; i < 100000; ++i) v.push_back(normal(rng));
  return v;
}

TEST(DType, ParsesNamesAndSizes) {
  EXPECT_EQ(ParseDType("f32"), DType::kF32);
  EXPECT_EQ(ParseDType("BF16"), DType::kBF16);
  EXPECT_EQ(ParseDType("float16"), DType::kF16);
  EXPECT_EQ(ParseDType("f64"), std::nullopt);
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeName(DType::kF16), "F16");
}

TEST(DType, F16ScalarKnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3C00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xC000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7BFF);
  EXPECT_EQ(F32ToF16(65519.996f), 0x7BFF);     // just below the halfway point to infinity
  EXPECT_EQ(F32ToF16(65520.0f), 0x7C00);       // halfway, ties to even: infinity
  EXPECT_EQ(F32ToF16(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(F32ToF16(2.9802322e-8f), 0x0000);  // exactly half of it: ties to even, zero
  EXPECT_EQ(F32ToF16(2.9802326e-8f), 0x0001);  // a hair above half: rounds up
  EXPECT_EQ(F32ToF16(1.0009766f), 0x3C01);
  EXPECT_EQ(F32ToF16(1.00048828125f), 0x3C00);  // halfway between 0x3C00 and 0x3C01: even
  EXPECT_EQ(F32ToF16(1.00146484375f), 0x3C02);  // halfway between 0x3C01 and 0x3C02: even
  EXPECT_EQ(F16ToF32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(F16ToF32(0x7E00)));
  EXPECT_EQ(F16ToF32(0x0001), 5.9604645e-8f);
}

TEST(DType, F16RoundTripsEveryHalf) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    float f = F16ToF32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(F32ToF16(f) & 0x7E00, 0x7E00) << h;  // stays a (quiet) NaN
      continue;
    }
    EXPECT_EQ(F32ToF16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(DType, BF16ScalarRoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3F80);
  EXPECT_EQ(F32ToBF16(FromBits(0x3F808000)), 0x3F80);  // halfway, even stays
  EXPECT_EQ(F32ToBF16(FromBits(0x3F818000)), 0x3F82);  // halfway, odd rounds up
  EXPECT_EQ(F32ToBF16(FromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(F32ToBF16(FromBits(0x7F7FFFFF)), 0x7F80);           // overflows to infinity
  EXPECT_EQ(F32ToBF16(FromBits(0x7F800001)) & 0x7FC0, 0x7FC0);  // NaN stays NaN
  EXPECT_EQ(BF16ToF32(0x3F80), 1.0f);
}

TEST(DType, OverflowThresholds) {
  EXPECT_FALSE(OverflowsTo(DType::kF16, 65519.0f));
  EXPECT_TRUE(OverflowsTo(DType::kF16, 65520.0f));
  EXPECT_TRUE(OverflowsTo(DType::kF16, -1e6f));
  EXPECT_FALSE(OverflowsTo(DType::kF16, std::numeric_limits<float>::infinity()));
  EXPECT_FALSE(OverflowsTo(DType::kBF16, FromBits(0x7F7F7FFF)));
  EXPECT_TRUE(OverflowsTo(DType::kBF16, FromBits(0x7F7F8000)));
  EXPECT_FALSE(OverflowsTo(DType::kF32, std::numeric_limits<float>::max()));
}

TEST(DTypeKernels, SimdMatchesScalarOnEdgeAndRandomInput) {
  const auto& ref = kernels::ScalarKernels();
  std::vector<float> in = EdgeAndRandomFloats();
  std::vector<std::uint16_t> want16(in.size()), got16(in.size());
  std::vector<float> want32(in.size()), got32(in.size());
  auto simd = SimdKernels();
  if (simd.empty()) GTEST_SKIP() << "no SIMD kernel runs on this CPU";
  for (const DTypeKernels* k : simd) {
    SCOPED_TRACE(k->name);
    // Odd lengths exercise the scalar tails.
    for (std::size_t n : {in.size(), in.size() - 7, std::size_t{5}}) {
      ref.f32_to_f16(in.data(), want16.data(), n);
      k->f32_to_f16(in.data(), got16.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(want16[i], got16[i]) << "f32->f16 of bits 0x" << std::hex << Bits(in[i]);
      }
      ref.f16_to_f32(want16.data(), want32.data(), n);
      k->f16_to_f32(want16.data(), got32.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(Bits(want32[i]), Bits(got32[i])) << i;
      ref.f32_to_bf16(in.data(), want16.data(), n);
      k->f32_to_bf16(in.data(), got16.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        ASSERT_EQ(want16[i], got16[i]) << "f32->bf16 of bits 0x" << std::hex << Bits(in[i]);
      }
      ref.bf16_to_f32(want16.data(), want32.data(), n);
      k->bf16_to_f32(want16.data(), got32.data(), n);
      for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(Bits(want32[i]), Bits(got32[i])) << i;
    }
  }
}

// The checked conversions of every level against the scalar reference: the same index of the
// first overflow wherever it lies (inside a block, at either edge of one, in the vector loops'
// tail, none), and the same values before it; infinities and NaNs are not overflows.
TEST(DTypeKernels, CheckedConversionsFindTheFirstOverflowAtEveryLevel) {
  std::vector<const DTypeKernels*> all = SimdKernels();
  all.push_back(&kernels::ScalarKernels());
  const auto& ref = kernels::ScalarKernels();
  constexpr std::size_t kB = kernels::kCheckBlock;
  const std::size_t n = 3 * kB + 13;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0, 1000);
  std::vector<float> base(n);
  for (auto& x : base) x = normal(rng);
  base[100] = std::numeric_limits<float>::infinity();
  base[700] = -std::numeric_limits<float>::quiet_NaN();
  base[1500] = FromBits(0x7F800001);  // a signalling NaN's bits
  base[2 * kB + 5] = -std::numeric_limits<float>::infinity();
  struct Case {
    bool bf16;
    float big;
  };
  for (const Case c : {Case{false, 65520.0f}, Case{false, -1e30f}, Case{true, 3.4e38f},
                       Case{true, -FromBits(0x7F7F8000)}}) {
    // Block edges, the unrolled vector loops' edges (8 and 16 values), the tail, none.
    for (std::size_t at : {std::size_t{0}, std::size_t{7}, std::size_t{8}, std::size_t{15},
                           std::size_t{16}, kB - 1, kB, kB + 1, kB + 17, std::size_t{1500},
                           2 * kB + 31, n - 13, n - 1, n}) {
      std::vector<float> in = base;
      if (at < n) in[at] = c.big;
      if (at + 5 < n) in[at + 5] = c.big;  // only the first counts
      std::vector<std::uint16_t> want(n), got(n);
      auto checked = [&](const DTypeKernels& k, std::uint16_t* out) {
        return c.bf16 ? k.f32_to_bf16_checked(in.data(), out, n)
                      : k.f32_to_f16_checked(in.data(), out, n);
      };
      ASSERT_EQ(checked(ref, want.data()), at) << (c.bf16 ? "bf16 " : "f16 ") << at;
      for (const DTypeKernels* k : all) {
        SCOPED_TRACE(k->name);
        ASSERT_EQ(checked(*k, got.data()), at) << (c.bf16 ? "bf16 " : "f16 ") << at;
        for (std::size_t i = 0; i < at; ++i) ASSERT_EQ(want[i], got[i]) << i;
      }
    }
  }
  // Values just below the limits are not overflows.
  std::vector<float> edge = {65519.996f, FromBits(0x477FEFFF), FromBits(0x7F7F7FFF)};
  std::vector<std::uint16_t> out(edge.size());
  for (const DTypeKernels* k : all) {
    EXPECT_EQ(k->f32_to_f16_checked(edge.data(), out.data(), 2), 2u) << k->name;
    EXPECT_EQ(k->f32_to_bf16_checked(edge.data(), out.data(), 3), 3u) << k->name;
  }
}

// XXH3-64 at every level against the scalar level's, at every length up to 2.5 KiB (xxhash's
// short, mid-size and long paths and their edges) and at 1 MiB (a checksum block), at odd
// offsets; and against known values so the reference itself cannot drift.
TEST(DTypeKernels, Checksum64IsTheSameAtEveryLevel) {
  std::vector<unsigned char> data((1 << 20) + 64);
  std::mt19937 rng(11);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const auto& ref = kernels::ScalarKernels();
  for (const DTypeKernels* k : SimdKernels()) {
    SCOPED_TRACE(k->name);
    for (std::size_t n = 0; n <= 2560; ++n) {
      ASSERT_EQ(k->checksum64(data.data() + 3, n), ref.checksum64(data.data() + 3, n)) << n;
    }
    ASSERT_EQ(k->checksum64(data.data() + 1, 1 << 20), ref.checksum64(data.data() + 1, 1 << 20));
  }
  EXPECT_EQ(ref.checksum64("", 0), 0x2D06800538D394C2ull);  // XXH3-64 of nothing, seed 0
  EXPECT_EQ(Checksum64(std::as_bytes(std::span<const unsigned char>(data))),
            ref.checksum64(data.data(), data.size()));
}

TEST(DType, ConvertFromF32FindsAnOverflowAnywhereInALongSpan) {
  std::vector<float> in(100003, 1.5f);
  in[77777] = std::numeric_limits<float>::infinity();  // infinities are not overflows
  in[88888] = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::byte> out(in.size() * 2);
  EXPECT_EQ(ConvertFromF32(DType::kBF16, in, out, OverflowPolicy::kError), std::nullopt);
  EXPECT_EQ(ConvertFromF32(DType::kF16, in, out, OverflowPolicy::kError), std::nullopt);
  in[99999] = -70000.0f;
  EXPECT_EQ(ConvertFromF32(DType::kF16, in, out, OverflowPolicy::kError),
            std::optional<std::size_t>(99999));
  EXPECT_EQ(ConvertFromF32(DType::kBF16, in, out, OverflowPolicy::kError), std::nullopt);
  in[5] = 3.4e38f;
  EXPECT_EQ(ConvertFromF32(DType::kBF16, in, out, OverflowPolicy::kError),
            std::optional<std::size_t>(5));
}

TEST(DType, ConvertFromF32ReportsFirstOverflow) {
  std::vector<float> in = {1.0f, 70000.0f, 2.0f};
  std::vector<std::byte> out(in.size() * 2);
  EXPECT_EQ(ConvertFromF32(DType::kF16, in, out, OverflowPolicy::kError), std::optional<size_t>(1));
  EXPECT_EQ(ConvertFromF32(DType::kF16, in, out, OverflowPolicy::kInfinity), std::nullopt);
  std::uint16_t h;
  std::memcpy(&h, out.data() + 2, 2);
  EXPECT_EQ(h, 0x7C00);
}

}  // namespace
}  // namespace embstore::store
