#include "metrics.h"

#include <cstdio>

namespace embstore::server {
namespace {

// Label values are quoted; backslash, quote and newline are escaped (exposition format spec).
std::string Label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

void Metrics::RecordRequest(const std::string& method, const std::string& code, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{method, code}];
  Histogram& h = latency_[method];
  std::size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  if (i < kBuckets.size()) ++h.counts[i];
  ++h.count;
  h.sum += seconds;
}

void Metrics::AddBytesServed(const std::string& table, std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes_[table] += bytes;
}

void Metrics::RecordCatalogEvent(const std::string& result) {
  std::lock_guard<std::mutex> lock(mu_);
  ++catalog_events_[result];
}

void Metrics::SetGaugeSource(std::function<std::map<std::string, double>()> source) {
  std::lock_guard<std::mutex> lock(mu_);
  gauges_ = std::move(source);
}

std::string Metrics::RenderPrometheus() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP embstore_bytes_served_total Payload bytes (rows and keys) sent to clients.\n";
  out += "# TYPE embstore_bytes_served_total counter\n";
  for (const auto& [table, n] : bytes_) {
    out +=
        "embstore_bytes_served_total{table=\"" + Label(table) + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP embstore_active_streams Streaming RPCs in progress.\n";
  out += "# TYPE embstore_active_streams gauge\n";
  out += "embstore_active_streams " + std::to_string(active_streams_.load()) + "\n";
  out += "# HELP embstore_requests_total Finished RPCs by method and gRPC status code.\n";
  out += "# TYPE embstore_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "embstore_requests_total{method=\"" + Label(key.first) + "\",code=\"" +
           Label(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP embstore_request_duration_seconds RPC latency, arrival to final status.\n";
  out += "# TYPE embstore_request_duration_seconds histogram\n";
  for (const auto& [method, h] : latency_) {
    const std::string m = Label(method);
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.counts[i];
      out += "embstore_request_duration_seconds_bucket{method=\"" + m + "\",le=\"" +
             Num(kBuckets[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += "embstore_request_duration_seconds_bucket{method=\"" + m + "\",le=\"+Inf\"} " +
           std::to_string(h.count) + "\n";
    out += "embstore_request_duration_seconds_sum{method=\"" + m + "\"} " + Num(h.sum) + "\n";
    out += "embstore_request_duration_seconds_count{method=\"" + m + "\"} " +
           std::to_string(h.count) + "\n";
  }
  out += "# HELP embstore_catalog_events_total Table files loaded, dropped or rejected.\n";
  out += "# TYPE embstore_catalog_events_total counter\n";
  for (const auto& [result, n] : catalog_events_) {
    out += "embstore_catalog_events_total{result=\"" + Label(result) + "\"} " + std::to_string(n) +
           "\n";
  }
  if (gauges_) {
    for (const auto& [name, v] : gauges_()) {
      out += "# TYPE " + name + " gauge\n" + name + " " + Num(v) + "\n";
    }
  }
  return out;
}

}  // namespace embstore::server
