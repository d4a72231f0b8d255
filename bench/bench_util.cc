#include "bench_util.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace embstore::bench {

std::unique_ptr<ChildProcess> StartChild(const std::string& bin,
                                         const std::vector<std::string>& args,
                                         bool capture_stderr) {
  auto child = std::make_unique<ChildProcess>(
      bin, args, ChildProcess::Options{.capture_stderr = capture_stderr, .stop_signal = SIGTERM});
  if (!child->started()) {
    std::fprintf(stderr, "bench: cannot run %s\n", bin.c_str());
    std::exit(1);
  }
  return child;
}

nlohmann::json AwaitLogOrExit(ChildProcess& child, const std::string& msg) {
  nlohmann::json j = child.AwaitLog(msg, std::chrono::seconds(60));
  if (j.is_null()) {
    std::fprintf(stderr, "bench: child did not log '%s':\n%s\n", msg.c_str(),
                 child.Stderr().c_str());
    std::exit(1);
  }
  return j;
}

Rss ReadRss(pid_t pid) {
  auto kb = testkit::ReadProcStatusKb(pid);
  auto get = [&](const char* field) { return static_cast<long>(kb[field]); };
  return Rss{get("RssAnon"), get("RssFile"), get("RssShmem"), get("VmRSS")};
}

double IperfBytesPerSecond(int seconds) {
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  auto server = StartChild("/usr/bin/iperf3", {"-s", "-1", "-p", std::to_string(port)}, false);
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
