// Metrics: the server's counters, gauges and histograms, rendered in the Prometheus text
// exposition format (version 0.0.4) for the /metrics endpoint. See docs/PROTOCOL.md, "Metrics",
// for the names.
//
// Thread safety: every method is safe to call concurrently.
#ifndef EMBSTORE_SERVER_SRC_METRICS_H_
#define EMBSTORE_SERVER_SRC_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace embstore::server {

class Metrics {
 public:
  // Called once per finished RPC.
  void RecordRequest(const std::string& method, const std::string& code, double seconds);
  void AddBytesServed(const std::string& table, std::uint64_t bytes);
  void StreamStarted() { active_streams_.fetch_add(1); }
  void StreamFinished() { active_streams_.fetch_sub(1); }
  std::int64_t active_streams() const { return active_streams_.load(); }
  void RecordCatalogEvent(const std::string& result);

  // Gauges read at scrape time (tables loaded, faults absorbed).
  void SetGaugeSource(std::function<std::map<std::string, double>()> source);

  std::string RenderPrometheus() const;

  // Histogram bucket upper bounds, seconds.
  static constexpr std::array<double, 16> kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120};

 private:
  struct Histogram {
    std::array<std::uint64_t, kBuckets.size()> counts{};  // non-cumulative
    std::uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::uint64_t> requests_;  // (method, code)
  std::map<std::string, Histogram> latency_;                               // by method
  std::map<std::string, std::uint64_t> bytes_;                             // by table
  std::map<std::string, std::uint64_t> catalog_events_;                    // by result
  std::function<std::map<std::string, double>()> gauges_;
  std::atomic<std::int64_t> active_streams_{0};
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_METRICS_H_
