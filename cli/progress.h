// A progress line for long CLI work: drawn on stderr only when it is a terminal, at most a few
// times a second, with throughput and an ETA.
#ifndef EMBSTORE_CLI_PROGRESS_H_
#define EMBSTORE_CLI_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace embstore::cli {

class Progress {
 public:
  // `label` starts the line, e.g. "verify vectors.emb". Disabled when stderr is not a TTY.
  explicit Progress(std::string label);
  ~Progress();  // clears the line

  // Reports `done` of `total` bytes; cheap when called often.
  void Update(std::uint64_t done, std::uint64_t total);
  void Finish();

  double Seconds() const;

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_PROGRESS_H_
