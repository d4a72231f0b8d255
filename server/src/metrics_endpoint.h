// Private: MetricsEndpoint, the HTTP endpoint that serves GET /metrics (Prometheus text format,
// metrics.h) on a thread of its own, with cpp-httplib.
//
// One request per connection: stopping waits for every connection thread, and a kept-alive
// connection (Prometheus keeps them) would hold the server's shutdown for up to the keep-alive
// timeout.
//
// Thread safety: requests are answered on the endpoint's own threads, which only read `metrics`
// (safe to update meanwhile). `metrics` given to Start must outlive the endpoint.
#ifndef EMBSTORE_SERVER_SRC_METRICS_ENDPOINT_H_
#define EMBSTORE_SERVER_SRC_METRICS_ENDPOINT_H_

#include <memory>
#include <string>
#include <thread>

#include "embstore/common/status.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace embstore::server {

class Metrics;

class MetricsEndpoint {
 public:
  // Binds `listen` ("HOST:PORT", port 0 picks a free one; brackets around an IPv6 host) and
  // starts serving. InvalidArgument for a malformed address, IOError when it cannot be bound.
  static Result<std::unique_ptr<MetricsEndpoint>> Start(const std::string& listen,
                                                        const Metrics* metrics);
  ~MetricsEndpoint();  // stops
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // The port bound.
  int port() const { return port_; }

  // Stops listening and waits for the requests being answered.
  void Stop();

 private:
  MetricsEndpoint();

  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_METRICS_ENDPOINT_H_
