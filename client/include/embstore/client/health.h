// Health: asks a server the standard gRPC health question (grpc.health.v1.Health/Check), the one
// Kubernetes gRPC probes, Docker HEALTHCHECKs (`embstore health`) and load balancers ask.
//
// An embstore server answers SERVING for service "" and "embstore.v1.EmbStore" while it runs and
// NOT_SERVING from the moment it starts draining (docs/PROTOCOL.md, "Health"). Health needs no
// token; the one in ConnectOptions is sent anyway, which servers accept.
//
// Each call opens its own connection, so a server that was down a moment ago is seen as soon as
// it listens, without gRPC's reconnect backoff in the way. Thread-safe; no state is kept.
#ifndef EMBSTORE_CLIENT_HEALTH_H_
#define EMBSTORE_CLIENT_HEALTH_H_

#include <chrono>
#include <string>
#include <string_view>

#include "embstore/client/client.h"
#include "embstore/common/status.h"

namespace embstore::client {

// The values of grpc.health.v1.HealthCheckResponse.ServingStatus.
enum class ServingStatus { kUnknown = 0, kServing = 1, kNotServing = 2, kServiceUnknown = 3 };

// "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN".
std::string_view ServingStatusName(ServingStatus s);

// One Health/Check call to options.target about `service` ("" is the server as a whole), bounded
// by options.rpc_timeout. Errors: InvalidArgument for a malformed target or unreadable TLS files,
// Unavailable (naming the target) when nothing answers, NotFound when the server does not know
// `service`, Unauthenticated when TLS client authentication fails.
Result<ServingStatus> CheckHealth(const ConnectOptions& options, const std::string& service = "");

// Calls CheckHealth until it reports SERVING or `timeout` has passed, `interval` apart. Returns
// OK once SERVING; otherwise Unavailable naming the target and the last status the server
// reported, or the last error when the server never answered (a last check cut short by the
// timeout does not hide an earlier answer).
Status WaitUntilServing(const ConnectOptions& options, const std::string& service,
                        std::chrono::milliseconds timeout,
                        std::chrono::milliseconds interval = std::chrono::milliseconds(200));

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_HEALTH_H_
