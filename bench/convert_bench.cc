// Micro-benchmarks of the converter's chunk kernels: bytes of text parsed per second, per kernel
// (scalar reference, avx2, avx512), for np.savetxt's '%.18e' and the shorter '%.8g', into f32 and
// f16. One thread, data in cache-sized chunks (2 MiB, like the converter's pipeline).
//
// Each iteration parses kChunks different chunks (16 MiB, within a server's last-level cache).
// One chunk parsed over and over lets the branch predictor learn its data: a data-dependent
// branch (the exponent's sign in '%.18e', compiled to a jump) once cost the AVX-512 kernel some
// 10 % on text it had not seen, and a benchmark of one repeated chunk hid it.
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

constexpr int kChunks = 8;

// kChunks chunks of about 2 MiB of text each, every one of other values, each with kPad blanks
// on both sides.
const std::vector<std::string>& Texts(bool e18) {
  static std::vector<std::string> texts[2];
  std::vector<std::string>& ts = texts[e18 ? 1 : 0];
  if (ts.empty()) {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    char buf[64];
    for (int i = 0; i < kChunks; ++i) {
      std::string t(kPad, ' ');
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
      ts.push_back(std::move(t));
    }
  }
  return ts;
}

void BM_ParseChunk(benchmark::State& state, const ParseKernel* kernel, bool e18, DType dtype) {
  std::vector<ChunkText> chunks;
  std::int64_t bytes = 0;
  for (const std::string& t : Texts(e18)) {
    chunks.push_back({t.data() + kPad, t.data() + t.size() - kPad, t.data(), t.data() + t.size()});
    bytes += static_cast<std::int64_t>(t.size() - 2 * kPad);
  }
  ParseParams p;
  p.dim = kDim;
  p.dtype = dtype;
  p.comments = "#";
  ChunkResult r;
  std::uint64_t values = 0;
  for (auto _ : state) {
    for (const ChunkText& text : chunks) {
      r.Clear();
      kernel->parse(text, p, &r);
      benchmark::DoNotOptimize(r.values.data());
      if (r.error.kind != ErrorKind::kNone) state.SkipWithError("parse error");
      values += r.rows * kDim;
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * bytes);
  state.counters["values/s"] =
      benchmark::Counter(static_cast<double>(values), benchmark::Counter::kIsRate);
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
