// Private: GrpcServer, the gRPC side of a running server. It builds the credentials (TLS, client
// certificates), binds every listen address, registers embstore.v1.EmbStore (grpc_handler.h),
// grpc.health.v1.Health and server reflection, applies the transport limits (receive size,
// memory quota, keepalive), and later drains and stops.
//
// This header does not include gRPC, so the server's lifecycle (server.cc) stays free of it.
//
// Thread safety: BeginDrain, CancelIdleStreams and LogSuppressed may be called from any thread;
// Shutdown once, from one thread. `config`, `service` and `metrics` given to Start must outlive
// the GrpcServer.
#ifndef EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_SERVER_H_
#define EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "embstore/common/status.h"
#include "embstore/server/config.h"

namespace grpc {
class Server;
}  // namespace grpc

namespace embstore::server {

class Handler;
class Metrics;
class Service;

class GrpcServer {
 public:
  // Starts serving `service` on every address of config.listen, health SERVING. IOError when an
  // address cannot be bound; an error naming the file when a TLS file cannot be read.
  static Result<std::unique_ptr<GrpcServer>> Start(const ServerConfig& config, Service* service,
                                                   Metrics* metrics);
  ~GrpcServer();  // stops at once if Shutdown was not called
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The addresses bound, in the order of config.listen, with port 0 resolved.
  const std::vector<std::string>& addresses() const { return addresses_; }

  // Health NOT_SERVING, and every new call refused with UNAVAILABLE; calls in flight go on.
  void BeginDrain();
  // Waits up to `grace` for the calls in flight, then stops: gracefully when they all ended,
  // cancelling the rest otherwise.
  void Shutdown(std::chrono::milliseconds grace);

  // The periodic chores the lifecycle runs: see Handler.
  void CancelIdleStreams(std::chrono::steady_clock::time_point now);
  void LogSuppressed(bool all);

 private:
  GrpcServer() = default;

  std::unique_ptr<Handler> handler_;
  std::unique_ptr<grpc::Server> server_;  // declared after handler_: destroyed before it
  std::vector<std::string> addresses_;
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_SERVER_H_
