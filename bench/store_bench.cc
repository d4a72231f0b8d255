// Micro-benchmarks of the store's per-element work, in bytes of input per second, one thread:
//   - dtype conversion: f16/bf16 -> f32 (loading a 16-bit table) and f32 -> f16/bf16 (writing one),
//     per SIMD level (scalar reference, avx2, avx512 where the CPU runs them) through the public
//     ConvertToF32On / ConvertFromF32On, so every level is measured in one run;
//   - the public ConvertFromF32 with OverflowPolicy::kError, which scans for overflow first;
//   - Checksum64 per level, the per-block checksum every write computes and every verified read
//     checks, and the row hash a delta sync compares.
// Buffers are 1 MiB of f32 (256 Ki values), about a block of rows, so they stay in L2/L3.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "embstore/store/checksum.h"
#include "embstore/store/dtype.h"
#include "embstore/store/simd.h"

namespace embstore::store {
namespace {

constexpr std::size_t kValues = 256 * 1024;

const std::vector<float>& Floats() {
  static const std::vector<float> v = [] {
    std::vector<float> out(kValues);
    std::mt19937_64 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (auto& x : out) x = dist(rng);
    return out;
  }();
  return v;
}

// The same values as 16-bit words of the given kind, converted by the scalar reference.
std::vector<std::uint16_t> Halves(bool bf16) {
  const auto& f = Floats();
  std::vector<std::uint16_t> out(f.size());
  ConvertFromF32On(simd::Isa::kScalar, bf16 ? DType::kBF16 : DType::kF16, f,
                   std::as_writable_bytes(std::span<std::uint16_t>(out)),
                   OverflowPolicy::kInfinity);
  return out;
}

void BM_ToF32(benchmark::State& state, simd::Isa isa, bool bf16) {
  const std::vector<std::uint16_t> src = Halves(bf16);
  std::vector<float> dst(src.size());
  const auto bytes = std::as_bytes(std::span<const std::uint16_t>(src));
  for (auto _ : state) {
    ConvertToF32On(isa, bf16 ? DType::kBF16 : DType::kF16, bytes, dst);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * src.size() * 2));
}

void BM_FromF32(benchmark::State& state, simd::Isa isa, bool bf16) {
  const auto& src = Floats();
  std::vector<std::byte> dst(src.size() * 2);
  for (auto _ : state) {
    ConvertFromF32On(isa, bf16 ? DType::kBF16 : DType::kF16, src, dst, OverflowPolicy::kInfinity);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * src.size() * 4));
}

// The public entry point as the writer calls it: overflow scan, then the active kernel.
void BM_ConvertFromF32Checked(benchmark::State& state, DType t) {
  const auto& src = Floats();
  std::vector<std::byte> dst(src.size() * DTypeSize(t));
  for (auto _ : state) {
    auto r = ConvertFromF32(t, src, dst, OverflowPolicy::kError);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * src.size() * 4));
}

void BM_Checksum64(benchmark::State& state, simd::Isa isa) {
  const auto& f = Floats();
  std::span<const std::byte> bytes = std::as_bytes(std::span<const float>(f));
  bytes = bytes.first(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(Checksum64On(isa, bytes));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}

int Register() {
  for (simd::Isa isa : simd::SupportedIsas()) {
    const std::string level(simd::IsaName(isa));
    for (bool bf16 : {false, true}) {
      const std::string t = bf16 ? "bf16" : "f16";
      benchmark::RegisterBenchmark(("DType/" + t + "_to_f32/" + level).c_str(), BM_ToF32, isa,
                                   bf16);
      benchmark::RegisterBenchmark(("DType/f32_to_" + t + "/" + level).c_str(), BM_FromF32, isa,
                                   bf16);
    }
  }
  for (DType t : {DType::kF16, DType::kBF16}) {
    benchmark::RegisterBenchmark(
        ("DType/ConvertFromF32_checked/" + std::string(DTypeName(t)) + "/active").c_str(),
        BM_ConvertFromF32Checked, t);
  }
  // Row-sized (512 bytes: 128 f32, what a delta sync hashes), a page, a checksum block.
  for (simd::Isa isa : simd::SupportedIsas()) {
    benchmark::RegisterBenchmark(("Checksum64/" + std::string(simd::IsaName(isa))).c_str(),
                                 BM_Checksum64, isa)
        ->Arg(512)
        ->Arg(4096)
        ->Arg(1 << 20);
  }
  return 0;
}
const int kRegistered = Register();

}  // namespace
}  // namespace embstore::store

BENCHMARK_MAIN();
