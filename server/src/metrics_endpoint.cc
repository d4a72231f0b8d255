#include "metrics_endpoint.h"

#include <httplib.h>

#include <utility>

#include "embstore/common/address.h"
#include "metrics.h"

namespace embstore::server {
namespace {

// "host:port" -> (host, port). Brackets around IPv6 hosts are removed.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& addr, const char* what) {
  EMBSTORE_ASSIGN_OR_RETURN(Address a, ParseAddress(addr, AddressUse::kListen, what));
  if (a.kind != Address::Kind::kHostPort) {
    return Status::InvalidArgument(std::string(what) + " '" + addr + "' is not HOST:PORT");
  }
  return std::make_pair(a.host, a.port);
}

}  // namespace

MetricsEndpoint::MetricsEndpoint() : http_(std::make_unique<httplib::Server>()) {}

MetricsEndpoint::~MetricsEndpoint() { Stop(); }

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(const std::string& listen,
                                                                const Metrics* metrics) {
  EMBSTORE_ASSIGN_OR_RETURN(auto hp, SplitHostPort(listen, "metrics address"));
  std::unique_ptr<MetricsEndpoint> e(new MetricsEndpoint());
  httplib::Server* http = e->http_.get();
  // A connection opened but still silent holds the shutdown for up to this timeout.
  http->set_keep_alive_max_count(1);
  http->set_keep_alive_timeout(1);
  http->Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->RenderPrometheus(), "text/plain; version=0.0.4; charset=utf-8");
  });
  int port = 0;
  if (hp.second == 0) {
    port = http->bind_to_any_port(hp.first);
  } else {
    port = http->bind_to_port(hp.first, hp.second) ? hp.second : -1;
  }
  if (port <= 0) return Status::IOError("could not listen for metrics on " + listen);
  e->port_ = port;
  e->thread_ = std::thread([http] { http->listen_after_bind(); });
  return e;
}

void MetricsEndpoint::Stop() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace embstore::server
