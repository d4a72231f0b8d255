// A child process for out-of-process tests and benchmark drivers: the real `embstore` binary (or
// any program) started with posix_spawn, its stdout sent to /dev/null and its stderr collected
// by a reader thread, so JSON log lines ("listening", ...) can be awaited.
#ifndef EMBSTORE_TESTKIT_CHILD_PROCESS_H_
#define EMBSTORE_TESTKIT_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace embstore::testkit {

class ChildProcess {
 public:
  struct Options {
    bool capture_stderr = true;  // else the child's stderr is this process's
    int stop_signal = SIGKILL;  // sent on destruction to a child still running
  };
  // Starts `bin` with `args` (argv[0] is `bin`). started() says whether it ran.
  ChildProcess(const std::string& bin, const std::vector<std::string>& args, Options options);
  ChildProcess(const std::string& bin, const std::vector<std::string>& args)
      : ChildProcess(bin, args, Options{}) {}
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Everything the child wrote to stderr so far.
  std::string Stderr();
  // The first JSON log line on stderr whose "msg" is `msg`, waiting up to `limit`; null when the
  // child exits or the time runs out first.
  nlohmann::json AwaitLog(const std::string& msg,
                          std::chrono::milliseconds limit = std::chrono::seconds(60));

  void Signal(int sig);
  bool HasExited();
  // Waits for the exit and the last of its stderr: the exit code, or 128 + the signal.
  int Wait();
  // Signal(sig), then Wait().
  int Stop(int sig);
  // A hang detector, not a speed check: false when the child still runs after `limit`.
  bool ExitsWithin(std::chrono::milliseconds limit);

 private:
  Options options_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
  std::thread reader_;
  std::mutex mu_;
  std::string err_;
};

// The kB fields of /proc/PID/status ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", ...);
// empty when the process is gone.
std::map<std::string, std::uint64_t> ReadProcStatusKb(pid_t pid);
// One of them; 0 when absent.
std::uint64_t ProcStatusKb(pid_t pid, const std::string& field);

}  // namespace embstore::testkit

#endif  // EMBSTORE_TESTKIT_CHILD_PROCESS_H_
