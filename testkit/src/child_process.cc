#include "embstore/testkit/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

extern char** environ;

namespace embstore::testkit {

ChildProcess::ChildProcess(const std::string& bin, const std::vector<std::string>& args,
                           Options options)
    : options_(options) {
  int fds[2] = {-1, -1};
  if (options_.capture_stderr && ::pipe2(fds, O_CLOEXEC) != 0) return;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (options_.capture_stderr) posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> full = {bin};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : full) argv.push_back(a.data());
  argv.push_back(nullptr);
  if (posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&fa);
  if (!options_.capture_stderr) return;
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

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !HasExited()) Stop(options_.stop_signal);
  if (reader_.joinable()) reader_.join();
}

std::string ChildProcess::Stderr() {
  std::lock_guard<std::mutex> lock(mu_);
  return err_;
}

nlohmann::json ChildProcess::AwaitLog(const std::string& msg, std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const std::string all = Stderr();
    std::size_t at = 0;
    for (std::size_t nl; (nl = all.find('\n', at)) != std::string::npos; at = nl + 1) {
      auto j = nlohmann::json::parse(all.substr(at, nl - at), nullptr, false);
      if (j.is_object() && j.value("msg", "") == msg) return j;
    }
    if (!started() || HasExited() || std::chrono::steady_clock::now() > give_up) return nullptr;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !exited_) ::kill(pid_, sig);
}

bool ChildProcess::HasExited() {
  if (exited_ || pid_ <= 0) return true;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    exited_ = true;
    status_ = st;
  }
  return exited_;
}

int ChildProcess::Wait() {
  if (pid_ <= 0) return -1;
  if (!exited_) {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    exited_ = true;
    status_ = st;
  }
  if (reader_.joinable()) reader_.join();
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

int ChildProcess::Stop(int sig) {
  Signal(sig);
  return Wait();
}

bool ChildProcess::ExitsWithin(std::chrono::milliseconds limit) {
  const auto give_up = std::chrono::steady_clock::now() + limit;
  while (!HasExited()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

std::map<std::string, std::uint64_t> ReadProcStatusKb(pid_t pid) {
  std::map<std::string, std::uint64_t> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    // "VmRSS:	  123456 kB"
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos || line.size() < 3 || line.compare(line.size() - 3, 3, " kB"))
      continue;
    try {
      out[line.substr(0, colon)] = std::stoull(line.substr(colon + 1));
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::uint64_t ProcStatusKb(pid_t pid, const std::string& field) {
  auto all = ReadProcStatusKb(pid);
  auto it = all.find(field);
  return it == all.end() ? 0 : it->second;
}

}  // namespace embstore::testkit
