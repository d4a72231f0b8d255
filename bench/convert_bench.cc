// Micro-benchmarks of the converter's chunk kernels: bytes of text parsed per second, per kernel
// (scalar reference, avx2, avx512), for np.savetxt's '%.18e' and the shorter '%.8g', into f32 and
// f16. One thread, data in cache-sized chunks (2 MiB, like the converter's pipeline).
#include <benchmark/benchmark.h>

#include <charconv>
#include <random>
#include <string>
#include <vector>

#include "embstore/convert/parse_kernels.h"

namespace embstore::convert {
namespace {

constexpr int kDim = 128;
constexpr std::size_t kPad = 128;

const std::string& Text(bool e18) {
  static std::string texts[2];
  std::string& t = texts[e18 ? 1 : 0];
  if (t.empty()) {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    char buf[64];
    t.assign(kPad, ' ');
    while (t.size() < (2u << 20)) {
      for (int c = 0; c < kDim; ++c) {
        double v = dist(rng);
        auto r = e18 ? std::to_chars(buf, buf + 64, v, std::chars_format::scientific, 18)
                     : std::to_chars(buf, buf + 64, v, std::chars_format::general, 8);
        t.append(buf, r.ptr);
        t.push_back(c + 1 == kDim ? '\n' : ' ');
      }
    }
    t.append(kPad, ' ');
  }
  return t;
}

void BM_ParseChunk(benchmark::State& state, const ParseKernel* kernel, bool e18, DType dtype) {
  const std::string& t = Text(e18);
  ChunkText text{t.data() + kPad, t.data() + t.size() - kPad, t.data(), t.data() + t.size()};
  ParseParams p;
  p.dim = kDim;
  p.dtype = dtype;
  p.comments = "#";
  ChunkResult r;
  for (auto _ : state) {
    r.Clear();
    kernel->parse(text, p, &r);
    benchmark::DoNotOptimize(r.values.data());
    if (r.error.kind != ErrorKind::kNone) state.SkipWithError("parse error");
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(text.end - text.begin));
  state.counters["values/s"] = benchmark::Counter(
      static_cast<double>(r.rows * kDim) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

int Register() {
  for (const ParseKernel* k : SupportedParseKernels()) {
    for (bool e18 : {true, false}) {
      for (DType dt : {DType::kF32, DType::kF16}) {
        std::string name = std::string("ParseChunk/") + k->name + (e18 ? "/%.18e" : "/%.8g") +
                           (dt == DType::kF32 ? "/f32" : "/f16");
        benchmark::RegisterBenchmark(name.c_str(), BM_ParseChunk, k, e18, dt)
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return 0;
}
const int kRegistered = Register();

}  // namespace
}  // namespace embstore::convert

BENCHMARK_MAIN();
