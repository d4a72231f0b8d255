// embstore_gen_text: writes a random ROWS x DIM float32 matrix as text, the way np.savetxt would
// with fmt='%.18e' or '%.8g' (space-separated, '\n' line ends), using every core. np.savetxt
// itself needs minutes for the 938,280 x 128 benchmark file; this takes seconds. Values are
// float32 draws from a normal distribution (seeded), printed from their double value as numpy
// does for a float32 array.
//
//   embstore_gen_text OUT ROWS DIM (e18|g8) [SEED]
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

// Appends one row. std::to_chars with a precision formats exactly as printf("%.*e"/"%.*g").
void FormatRow(std::mt19937_64& rng, int dim, bool e18, std::string* out) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  char buf[64];
  for (int c = 0; c < dim; ++c) {
    double v = static_cast<double>(dist(rng));
    auto res = e18 ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, 18)
                   : std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 8);
    out->append(buf, res.ptr);
    out->push_back(c + 1 == dim ? '\n' : ' ');
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s OUT ROWS DIM (e18|g8) [SEED]\n", argv[0]);
    return 2;
  }
  const std::string out_path = argv[1];
  const long rows = std::atol(argv[2]);
  const int dim = std::atoi(argv[3]);
  const bool e18 = std::strcmp(argv[4], "e18") == 0;
  if (!e18 && std::strcmp(argv[4], "g8") != 0) {
    std::fprintf(stderr, "format must be e18 or g8\n");
    return 2;
  }
  const unsigned long long seed = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 42;
  std::FILE* f = std::fopen(out_path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(out_path.c_str());
    return 1;
  }
  // Blocks of rows, each with its own seed, formatted in parallel and written in order.
  const long block = 4096;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  for (long base = 0; base < rows; base += block * threads) {
    std::vector<std::string> parts(threads);
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        long first = base + static_cast<long>(t) * block;
        long last = std::min(rows, first + block);
        if (first >= last) return;
        std::mt19937_64 rng(seed * 1000003ull + static_cast<unsigned long long>(first));
        parts[t].reserve(static_cast<std::size_t>((last - first) * dim * 26));
        for (long r = first; r < last; ++r) FormatRow(rng, dim, e18, &parts[t]);
      });
    }
    for (auto& th : ts) th.join();
    for (const auto& p : parts) {
      if (std::fwrite(p.data(), 1, p.size(), f) != p.size()) {
        std::perror("write");
        return 1;
      }
    }
  }
  if (std::fclose(f) != 0) {
    std::perror("close");
    return 1;
  }
  return 0;
}
