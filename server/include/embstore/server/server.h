// Server: `embstore serve` as a library. Serves every table of a directory over gRPC
// (embstore.v1.EmbStore, grpc.health.v1.Health, server reflection) and, optionally, Prometheus
// metrics over HTTP. docs/PROTOCOL.md describes what clients see; docs/SERVING.md how to run it.
//
// This header (with config.h, the configuration) is all a program that runs a server needs. Neither gRPC, protobuf nor the table catalog shows through it; they are private to the
// library (server/src/).
//
// Lifecycle: Start() validates the configuration, loads the catalog, binds every listen address
// and returns a running server, which the caller owns. BeginDrain() turns health to NOT_SERVING
// and refuses new RPCs with UNAVAILABLE while streams in flight go on. Shutdown(grace) drains,
// waits up to `grace` for in-flight RPCs, cancels the rest, and stops the catalog watcher and the
// metrics endpoint. The destructor shuts down with no grace.
//
// Thread safety: BeginDrain/Shutdown may be called from any thread (a signal-waiting thread, for
// instance), once or repeatedly; the other methods are safe to call concurrently with them.
#ifndef EMBSTORE_SERVER_SERVER_H_
#define EMBSTORE_SERVER_SERVER_H_

#include <chrono>
#include <memory>

#include "embstore/common/status.h"
#include "embstore/server/config.h"

namespace embstore::server {

class Server {
 public:
  static Result<std::unique_ptr<Server>> Start(const ServerConfig& config);
  virtual ~Server() = default;

  // The addresses actually bound, in the order of config.listen, with port 0 resolved
  // ("127.0.0.1:41234", "unix:/run/embstore.sock").
  virtual const std::vector<std::string>& addresses() const = 0;
  // The metrics port actually bound; 0 without a metrics endpoint.
  virtual int metrics_port() const = 0;

  virtual void BeginDrain() = 0;
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
  // Blocks until Shutdown() has completed.
  virtual void Wait() = 0;

  // For tests and tooling: rescans the store directory now instead of at the next poll, so a
  // table file written (or removed) before the call is served (or gone) once it returns. Only a
  // failure to list the directory is an error.
  virtual Status RefreshCatalog() = 0;
  // The text GET /metrics would return, whether or not the endpoint is on.
  virtual std::string RenderMetrics() const = 0;
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SERVER_H_
