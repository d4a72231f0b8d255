// Client load throughput, measured side by side with its ceilings in one run:
//   1. iperf3's single-stream loopback throughput;
//   2. embstore::client::OpenServerSource + CopyRows over loopback TCP from `embstore serve`, with 1..N parallel
//      verified streams, into a buffer already in memory;
//   3. the local fast path (the server's file mapped by the client) against a plain memcpy of the
//      same bytes from the page cache.
// Prints each figure and its ratio to the ceiling; never asserts speed.
//
// With --target, only (2), from a server already running, of its table --table, into a buffer
// already in memory and into a new one each time: bench/harness runs it round by round with the
// Python client on the same server, so that both see the machine in the same state.
//
// Usage: pull_bench [--rows N] [--dim D] [--streams 1,2,4,8] [--repeats R] [--seconds S]
//                   [--json FILE] [--quick]
//        pull_bench --target HOST:PORT --table NAME [--streams ...] [--repeats R] [--json FILE]
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "bench_util.h"
#include "embstore/client/row_source.h"
#include "embstore/store/table.h"
#include "embstore/store/writer.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a) {
  return std::chrono::duration<double>(Clock::now() - a).count();
}

[[noreturn]] void Fail(const embstore::Status& st) {
  std::fprintf(stderr, "pull_bench: %s\n", st.ToString().c_str());
  std::exit(1);
}

void MakeTable(const std::string& path, std::uint64_t rows, std::uint64_t dim) {
  embstore::store::WriterOptions o;
  o.dim = dim;
  auto w = embstore::store::TableWriter::Create(path, o);
  if (!w.ok()) Fail(w.status());
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  std::vector<float> chunk(std::min<std::uint64_t>(rows, 65536) * dim);
  for (auto& v : chunk) v = dist(rng);
  for (std::uint64_t r = 0; r < rows;) {
    std::uint64_t n = std::min<std::uint64_t>(rows - r, chunk.size() / dim);
    chunk[0] = static_cast<float>(r);  // rows differ from chunk to chunk
    if (!(*w)->AppendRowsF32(std::span<const float>(chunk).first(n * dim)).ok()) std::exit(1);
    r += n;
  }
  if (!(*w)->Finish().ok()) std::exit(1);
}

// Anonymous memory for a load's destination; touched first when `prefault`.
std::span<std::byte> MapBuffer(std::uint64_t bytes, bool prefault) {
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) Fail(embstore::Status::FromErrno("mmap", errno));
  std::span<std::byte> out(static_cast<std::byte*>(mem), bytes);
  if (prefault) std::memset(out.data(), 1, out.size());
  return out;
}

// --target: loads of `table` from a running server, best of `repeats` per stream count, into a
// buffer in memory already (as Python's embstore.load(out=)) and into a new one each time (as
// embstore.load without out=, which pays for fresh pages).
int RemoteLoads(const std::string& target, const std::string& table,
                const std::vector<int>& streams, int repeats, const std::string& json_out) {
  embstore::client::ConnectOptions co;
  co.target = target;
  // Opened once (connects and describes; not timed), streamed: never the server's file.
  auto source = embstore::client::OpenServerSource(co, table, /*allow_local=*/false);
  if (!source.ok()) Fail(source.status());
  const embstore::client::TableDesc& desc = (*source)->desc();
  const std::uint64_t bytes = desc.rows * desc.row_bytes;
  nlohmann::ordered_json streamed = nlohmann::ordered_json::array();
  for (int n : streams) {
    embstore::client::ReadOptions o;
    o.streams = n;
    double in_memory = 0, fresh = 0;
    std::span<std::byte> kept = MapBuffer(bytes, /*prefault=*/true);
    for (int i = 0; i < repeats; ++i) {
      auto start = Clock::now();
      auto st = (*source)->CopyRows(0, desc.rows, kept, o);
      if (!st.ok()) Fail(st.status());
      in_memory = std::max(in_memory, bytes / Seconds(start));
      start = Clock::now();
      std::span<std::byte> now = MapBuffer(bytes, /*prefault=*/false);
      st = (*source)->CopyRows(0, desc.rows, now, o);
      if (!st.ok()) Fail(st.status());
      fresh = std::max(fresh, bytes / Seconds(start));
      ::munmap(now.data(), now.size());
    }
    ::munmap(kept.data(), kept.size());
    streamed.push_back({{"streams", n}, {"bytes_per_s", in_memory}, {"fresh_bytes_per_s", fresh}});
    std::printf("client, %2d stream%s over TCP: %6.2f GB/s in memory, %6.2f GB/s into new memory\n",
                n, n == 1 ? " " : "s", in_memory / 1e9, fresh / 1e9);
  }
  nlohmann::ordered_json results;
  results["bytes"] = bytes;
  results["streamed"] = streamed;
  if (!json_out.empty()) std::ofstream(json_out) << results.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Client load throughput against iperf3 and memcpy, in one run"};
  std::uint64_t rows = 938280, dim = 128;
  std::vector<int> streams = {1, 2, 4, 8};
  int repeats = 3, seconds = 3;
  bool quick = false;
  std::string json_out, remote_target, remote_table = "seed";
  app.add_option("--target", remote_target, "Measure only loads from this running server");
  app.add_option("--table", remote_table, "With --target: the table to load (default seed)");
  app.add_option("--rows", rows, "Table rows (default 938280)");
  app.add_option("--dim", dim, "Table dim (default 128)");
  app.add_option("--streams", streams, "Stream counts to measure")->delimiter(',');
  app.add_option("--repeats", repeats, "Best of this many loads per setting (default 3)");
  app.add_option("--seconds", seconds, "iperf3 duration (default 3)");
  app.add_option("--json", json_out, "Also write the results as JSON to this file");
  app.add_flag("--quick", quick, "A small table and one repeat: a smoke test");
  CLI11_PARSE(app, argc, argv);
  if (!remote_target.empty()) {
    return RemoteLoads(remote_target, remote_table, streams, repeats, json_out);
  }
  if (quick) {
    rows = std::min<std::uint64_t>(rows, 50000);
    repeats = 1;
    seconds = 1;
  }

  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("pull-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string table_path = (dir / "seed.emb").string();
  MakeTable(table_path, rows, dim);
  const std::uint64_t bytes = rows * dim * 4;
  std::printf("table: %llu x %llu f32, %.1f MB\n", static_cast<unsigned long long>(rows),
              static_cast<unsigned long long>(dim), bytes / 1e6);

  nlohmann::ordered_json results;
  results["rows"] = rows;
  results["dim"] = dim;
  results["bytes"] = bytes;

  const double iperf = embstore::bench::IperfBytesPerSecond(seconds);
  results["iperf3_bytes_per_s"] = iperf;
  std::printf("iperf3 single stream:        %6.2f GB/s\n", iperf / 1e9);

  auto server = embstore::bench::StartChild(
      EMBSTORE_BIN,
      {"serve", "--store", dir.string(), "--listen", "127.0.0.1:0", "--log-level", "info"}, true);
  const std::string target =
      embstore::bench::AwaitLogOrExit(*server, "listening")["addresses"][0];
  embstore::client::ConnectOptions co;
  co.target = target;
  // Two sources of the one table, opened (connected and described) before anything is timed:
  // one always streams, the other reads the server's file, which is this host's.
  auto streamed_source = embstore::client::OpenServerSource(co, "seed", /*allow_local=*/false);
  if (!streamed_source.ok()) Fail(streamed_source.status());
  auto local_source = embstore::client::OpenServerSource(co, "seed", /*allow_local=*/true);
  if (!local_source.ok()) Fail(local_source.status());
  if ((*local_source)->local_table() == nullptr) {
    Fail(embstore::Status::FailedPrecondition("the server's file is not readable here"));
  }

  // The destination is touched once beforehand, so page faults on first write are not timed.
  std::span<std::byte> out = MapBuffer(bytes, /*prefault=*/true);

  auto best_load = [&](embstore::client::RowSource& source, embstore::client::ReadOptions o) {
    double best = 0;
    for (int i = 0; i < repeats; ++i) {
      auto start = Clock::now();
      auto st = source.CopyRows(0, rows, out, o);
      double s = Seconds(start);
      if (!st.ok()) Fail(st.status());
      best = std::max(best, bytes / s);
    }
    return best;
  };

  nlohmann::ordered_json streamed = nlohmann::ordered_json::array();
  for (int n : streams) {
    embstore::client::ReadOptions o;
    o.streams = n;
    double bps = best_load(**streamed_source, o);
    streamed.push_back(
        {{"streams", n}, {"bytes_per_s", bps}, {"ratio_to_iperf3", iperf > 0 ? bps / iperf : 0}});
    std::printf("client, %2d stream%s over TCP: %6.2f GB/s  (%.0f%% of iperf3)\n", n,
                n == 1 ? " " : "s", bps / 1e9, iperf > 0 ? 100 * bps / iperf : 0);
  }
  results["streamed"] = streamed;

  embstore::client::ReadOptions local;
  local.verify = true;
  const double local_verified = best_load(**local_source, local);
  local.verify = false;
  const double local_raw = best_load(**local_source, local);

  auto table = embstore::store::Table::Open(table_path);
  auto src = *(*table)->RowBytes(0, rows);
  double memcpy_bps = 0;
  for (int i = 0; i < std::max(repeats, 2); ++i) {
    auto start = Clock::now();
    std::memcpy(out.data(), src.data(), bytes);
    memcpy_bps = std::max(memcpy_bps, bytes / Seconds(start));
  }
  results["local_verified_bytes_per_s"] = local_verified;
  results["local_bytes_per_s"] = local_raw;
  results["memcpy_bytes_per_s"] = memcpy_bps;
  std::printf("local path, verified:        %6.2f GB/s  (%.0f%% of memcpy)\n", local_verified / 1e9,
              100 * local_verified / memcpy_bps);
  std::printf("local path, unverified:      %6.2f GB/s  (%.0f%% of memcpy)\n", local_raw / 1e9,
              100 * local_raw / memcpy_bps);
  std::printf("memcpy from the page cache:  %6.2f GB/s\n", memcpy_bps / 1e9);

  if (!json_out.empty()) std::ofstream(json_out) << results.dump(2) << "\n";
  ::munmap(out.data(), out.size());
  server->Stop(SIGTERM);
  fs::remove_all(dir);
  return 0;
}
