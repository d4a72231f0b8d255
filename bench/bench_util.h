// Private helpers shared by the benchmark drivers: child processes, memory readings and the
// iperf3 loopback ceiling. Benchmarks print figures; they never assert speed.
#ifndef EMBSTORE_BENCH_BENCH_UTIL_H_
#define EMBSTORE_BENCH_BENCH_UTIL_H_

#include <sys/types.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace embstore::bench {

// A child process (posix_spawn), stdout to /dev/null, stderr optionally captured. SIGTERMed and
// reaped on destruction.
class Child {
 public:
  Child(const std::string& bin, const std::vector<std::string>& args, bool capture_stderr);
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  void Stop(int sig);
  std::string Stderr();
  // Waits (up to a minute) for a JSON log line on stderr whose "msg" is `msg`; exits on timeout.
  nlohmann::json AwaitLog(const std::string& msg);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::thread reader_;
  std::mutex mu_;
  std::string err_;
};

// kB fields of /proc/PID/status.
struct Rss {
  long anon_kb = 0, file_kb = 0, shmem_kb = 0, total_kb = 0;
};
Rss ReadRss(pid_t pid);

// iperf3's single-stream loopback throughput in bytes/s over `seconds` (0 when iperf3 fails).
double IperfBytesPerSecond(int seconds);

}  // namespace embstore::bench

#endif  // EMBSTORE_BENCH_BENCH_UTIL_H_
