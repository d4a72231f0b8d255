#include "embstore/client/health.h"

#include <grpcpp/grpcpp.h>

#include <optional>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc_util.h"

namespace embstore::client {
namespace {

using Clock = std::chrono::steady_clock;

// A channel on a connection of its own, with the credentials ConnectOptions asks for.
Result<std::shared_ptr<grpc::Channel>> OpenChannel(const ConnectOptions& o) {
  EMBSTORE_RETURN_NOT_OK(internal::CheckTarget(o.target));
  internal::SettleClockBeforeConnecting();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  EMBSTORE_ASSIGN_OR_RETURN(auto creds, internal::MakeCredentials(o, &args));
  return grpc::CreateCustomChannel(o.target, creds, args);
}

}  // namespace

std::string_view ServingStatusName(ServingStatus s) {
  switch (s) {
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

Result<ServingStatus> CheckHealth(const ConnectOptions& options, const std::string& service) {
  EMBSTORE_ASSIGN_OR_RETURN(auto channel, OpenChannel(options));
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  internal::PrepareContext(&ctx, options, std::nullopt, /*unary=*/true);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    return Status::NotFound("server '" + options.target + "' has no health status for service '" +
                            service + "'");
  }
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    return Status::Unimplemented("server '" + options.target +
                                 "' does not implement grpc.health.v1.Health");
  }
  if (!s.ok()) return internal::FromGrpc(s, options.target);
  switch (resp.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      return ServingStatus::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      return ServingStatus::kNotServing;
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN:
      return ServingStatus::kServiceUnknown;
    default:
      return ServingStatus::kUnknown;
  }
}

Status WaitUntilServing(const ConnectOptions& options, const std::string& service,
                        std::chrono::milliseconds timeout, std::chrono::milliseconds interval) {
  const auto deadline = Clock::now() + timeout;
  std::optional<ServingStatus> answered;  // what the server last said, when it said anything
  for (;;) {
    ConnectOptions o = options;
    // No single check may outlast the overall deadline.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left < o.rpc_timeout) o.rpc_timeout = std::max(left, std::chrono::milliseconds(1));
    auto st = CheckHealth(o, service);
    if (st.ok() && *st == ServingStatus::kServing) return Status::OK();
    if (!st.ok() && (st.status().code() == StatusCode::kInvalidArgument ||
                     st.status().code() == StatusCode::kUnimplemented)) {
      return st.status();  // waiting cannot help
    }
    if (st.ok()) answered = *st;
    if (Clock::now() + interval >= deadline) {
      // A last check cut short by the wait's own deadline says less than the server's last
      // answer (a loaded machine can take the whole remaining time to connect).
      const bool cut_short = !st.ok() && st.status().code() == StatusCode::kDeadlineExceeded;
      if (!st.ok() && !(cut_short && answered)) return st.status();
      return Status::Unavailable("server '" + options.target + "' reports " +
                                 std::string(ServingStatusName(*answered)) + " for service '" +
                                 service + "' after waiting " + std::to_string(timeout.count()) +
                                 " ms");
    }
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace embstore::client
