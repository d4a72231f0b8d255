#include "bench_util.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

extern char** environ;

namespace embstore::bench {

Child::Child(const std::string& bin, const std::vector<std::string>& args, bool capture_stderr) {
  int fds[2] = {-1, -1};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (capture_stderr) {
    if (::pipe2(fds, O_CLOEXEC) != 0) std::abort();
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  }
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> full = {bin};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ) != 0) {
    std::fprintf(stderr, "bench: cannot run %s\n", bin.c_str());
    std::exit(1);
  }
  posix_spawn_file_actions_destroy(&fa);
  if (capture_stderr) {
    ::close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      ssize_t n;
      while ((n = ::read(fd, buf, sizeof buf)) > 0) {
        std::lock_guard<std::mutex> lock(mu_);
        err_.append(buf, static_cast<std::size_t>(n));
      }
      ::close(fd);
    });
  }
}

Child::~Child() {
  Stop(SIGTERM);
  if (reader_.joinable()) reader_.join();
}

void Child::Stop(int sig) {
  if (pid_ <= 0) return;
  ::kill(pid_, sig);
  int st;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
}

std::string Child::Stderr() {
  std::lock_guard<std::mutex> lock(mu_);
  return err_;
}

nlohmann::json Child::AwaitLog(const std::string& msg) {
  for (int i = 0; i < 6000; ++i) {
    std::istringstream in(Stderr());
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.value("msg", "") == msg) return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "bench: child did not log '%s':\n%s\n", msg.c_str(), Stderr().c_str());
  std::exit(1);
}

Rss ReadRss(pid_t pid) {
  Rss r;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  long v;
  std::string line;
  while (std::getline(in, line)) {
    if (std::sscanf(line.c_str(), "RssAnon: %ld", &v) == 1) r.anon_kb = v;
    if (std::sscanf(line.c_str(), "RssFile: %ld", &v) == 1) r.file_kb = v;
    if (std::sscanf(line.c_str(), "RssShmem: %ld", &v) == 1) r.shmem_kb = v;
    if (std::sscanf(line.c_str(), "VmRSS: %ld", &v) == 1) r.total_kb = v;
  }
  return r;
}

double IperfBytesPerSecond(int seconds) {
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  Child server("/usr/bin/iperf3", {"-s", "-1", "-p", std::to_string(port)}, false);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string cmd = "iperf3 -c 127.0.0.1 -p " + std::to_string(port) + " -t " +
                    std::to_string(seconds) + " -J 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  ::pclose(p);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object() || !j.contains("end")) {
    std::fprintf(stderr, "bench: iperf3 gave no result:\n%s\n", out.c_str());
    return 0;
  }
  return j["end"]["sum_received"]["bits_per_second"].get<double>() / 8;
}

}  // namespace embstore::bench
