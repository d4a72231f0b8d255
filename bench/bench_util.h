// Private helpers shared by the benchmark drivers: child processes that must start (the driver
// exits with a message otherwise), memory readings and the iperf3 loopback ceiling. Processes and
// /proc readings themselves come from embstore::testkit. Benchmarks print figures; they never
// assert speed.
#ifndef EMBSTORE_BENCH_BENCH_UTIL_H_
#define EMBSTORE_BENCH_BENCH_UTIL_H_

#include <sys/types.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "embstore/testkit/child_process.h"

namespace embstore::bench {

using testkit::ChildProcess;

// Starts `bin` (stdout to /dev/null, stderr captured when asked; SIGTERMed and reaped when the
// object goes away), or exits the benchmark saying it could not.
std::unique_ptr<ChildProcess> StartChild(const std::string& bin,
                                         const std::vector<std::string>& args,
                                         bool capture_stderr);

// The child's JSON log line whose "msg" is `msg` (up to a minute), or exits the benchmark with
// what the child wrote.
nlohmann::json AwaitLogOrExit(ChildProcess& child, const std::string& msg);

// kB fields of /proc/PID/status.
struct Rss {
  long anon_kb = 0, file_kb = 0, shmem_kb = 0, total_kb = 0;
};
Rss ReadRss(pid_t pid);

// iperf3's single-stream loopback throughput in bytes/s over `seconds` (0 when iperf3 fails).
double IperfBytesPerSecond(int seconds);

}  // namespace embstore::bench

#endif  // EMBSTORE_BENCH_BENCH_UTIL_H_
