#include "progress.h"

#include <cstdio>

#include "command.h"

namespace embstore::cli {

Progress::Progress(std::string label)
    : label_(std::move(label)),
      enabled_(StderrIsTty()),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { Finish(); }

double Progress::Seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::Update(std::uint64_t done, std::uint64_t total) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(200) && done < total) return;
  last_ = now;
  double secs = std::chrono::duration<double>(now - start_).count();
  double mbps = secs > 0 ? done / secs / 1e6 : 0;
  double frac = total ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  double eta = (mbps > 0 && total > done) ? (total - done) / 1e6 / mbps : 0;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(frac * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %8.1f MB/s ETA %4.0fs ", label_.c_str(), bar.c_str(),
               frac * 100, mbps, eta);
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::Finish() {
  if (enabled_ && drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

}  // namespace embstore::cli
