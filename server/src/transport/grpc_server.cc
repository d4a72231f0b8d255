// The gRPC server of `embstore serve`: credentials, listening ports, transport limits, the
// services, and the order of a graceful stop.
#include "grpc_server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <google/protobuf/stubs/logging.h>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <climits>
#include <cstdint>
#include <sstream>

#include "embstore/common/address.h"
#include "embstore/common/read_file.h"
#include "embstore/server/log.h"
#include "grpc_handler.h"

namespace embstore::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kServiceName = "embstore.v1.EmbStore";

// At most this long (and never past the grace period) connections may take to close once every
// call has ended.
constexpr std::chrono::seconds kConnectionCloseWait{1};

Result<std::shared_ptr<grpc::ServerCredentials>> Credentials(const TlsConfig& tls) {
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  EMBSTORE_ASSIGN_OR_RETURN(auto cert, ReadSmallFile(tls.cert_file, "TLS certificate"));
  EMBSTORE_ASSIGN_OR_RETURN(auto key, ReadSmallFile(tls.key_file, "TLS key"));
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (!tls.client_ca_file.empty()) {
    EMBSTORE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadSmallFile(tls.client_ca_file, "client CA file"));
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// Protobuf prints to stderr by itself, once per malformed request (a string field that is not
// UTF-8, say): a flood of bad requests would flood the log past its rate limits. Its messages go
// to the server's log at debug level instead; the request's own failure is logged as an rpc.
void LogProtobufMessage(google::protobuf::LogLevel level, const char* filename, int line,
                        const std::string& message) {
  Log(level >= google::protobuf::LOGLEVEL_FATAL ? LogLevel::kError : LogLevel::kDebug,
      "protobuf", {{"message", message}, {"at", std::string(filename) + ":" + std::to_string(line)}});
}

std::string JoinListen(const std::vector<std::string>& listen) {
  std::string s;
  for (const auto& a : listen) s += (s.empty() ? "" : ", ") + a;
  return s;
}

// A port another process listens on is reported here, before gRPC sees it. gRPC's own failure
// (BuildAndStart returning null) logs only "No address added", and tearing down the server it
// half built has been seen to hang. This is a check, not a reservation: a port taken between
// it and gRPC's bind still fails in BuildAndStart. Port 0, Unix sockets and resolver targets
// are left to gRPC.
Status CheckPortFree(const std::string& listen) {
  auto parsed = ParseAddress(listen, AddressUse::kListen, "listen address");
  if (!parsed.ok()) return parsed.status();
  if (parsed->kind != Address::Kind::kHostPort || parsed->port == 0) return Status::OK();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(parsed->port);
  const char* host = parsed->host.empty() ? nullptr : parsed->host.c_str();
  if (getaddrinfo(host, port.c_str(), &hints, &found) != 0) return Status::OK();  // gRPC says
  Status st;
  for (addrinfo* a = found; a != nullptr && st.ok(); a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;  // no IPv6 here, say: gRPC skips that family too
    int one = 1;
    // As gRPC does: a port held only by connections in TIME_WAIT is free.
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 && errno == EADDRINUSE) {
      st = Status::IOError("could not listen on " + listen + ": the address is in use (" +
                           std::strerror(EADDRINUSE) + "); is another server running there?");
    }
    close(fd);
  }
  freeaddrinfo(found);
  return st;
}

}  // namespace

GrpcServer::~GrpcServer() = default;

Result<std::unique_ptr<GrpcServer>> GrpcServer::Start(const ServerConfig& config,
                                                      Service* service, Metrics* metrics) {
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  s->handler_ = std::make_unique<Handler>(service, metrics, config);
  EMBSTORE_ASSIGN_OR_RETURN(auto creds, Credentials(config.tls));

  google::protobuf::SetLogHandler(&LogProtobufMessage);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  for (const std::string& a : config.listen) EMBSTORE_RETURN_NOT_OK(CheckPortFree(a));
  grpc::ServerBuilder builder;
  std::vector<int> ports(config.listen.size(), 0);
  for (std::size_t i = 0; i < config.listen.size(); ++i) {
    builder.AddListeningPort(config.listen[i], creds, &ports[i]);
  }
  builder.RegisterService(s->handler_.get());
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<std::uint64_t>(config.max_receive_message_bytes, INT32_MAX)));
  if (config.max_transport_memory_bytes > 0) {
    // gRPC checks the receive limit only once a request has arrived whole, so without a quota
    // every client could make the server buffer a request of any size. Over the quota, gRPC
    // closes idle connections and then cancels calls (RESOURCE_EXHAUSTED) to get back under.
    grpc::ResourceQuota quota("embstore");
    quota.Resize(static_cast<std::size_t>(config.max_transport_memory_bytes));
    builder.SetResourceQuota(quota);
  }
  const auto& ka = config.keepalive;
  // gRPC sets SO_REUSEPORT by default: a second server on a busy port would start and share its
  // connections with the first. A port in use must be an error instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(ka.time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(ka.timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                             ka.permit_without_calls ? 1 : 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(ka.min_client_ping_ms));
  if (ka.max_connection_idle_ms > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                               static_cast<int>(ka.max_connection_idle_ms));
  }
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr) {
    return Status::IOError("could not start the gRPC server on " + JoinListen(config.listen) +
                           " (address in use, bad address, or unreadable TLS files)");
  }
  for (std::size_t i = 0; i < config.listen.size(); ++i) {
    const std::string& a = config.listen[i];
    if (a.rfind("unix:", 0) == 0 || a.rfind("unix-abstract:", 0) == 0) {
      s->addresses_.push_back(a);
      continue;
    }
    if (ports[i] == 0) {
      s->server_->Shutdown();
      return Status::IOError("could not listen on " + a);
    }
    auto colon = a.rfind(':');
    s->addresses_.push_back(a.substr(0, colon + 1) + std::to_string(ports[i]));
  }
  auto* health = s->server_->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus(kServiceName, true);
  return s;
}

void GrpcServer::BeginDrain() {
  handler_->set_draining();
  server_->GetHealthCheckService()->SetServingStatus(false);
}

void GrpcServer::Shutdown(std::chrono::milliseconds grace) {
  // Let calls in flight finish within the grace period. gRPC's own Shutdown(deadline) also
  // waits until every client connection is gone, and a client may keep an idle one open, so
  // the wait for calls is done here. When they all ended, gRPC gets a short deadline to
  // close connections gracefully (GOAWAY; clients close idle connections at once): a call
  // ends on the server before its last frames have left, and closing the sockets under them
  // (or exiting) resets the connection, and the client sees UNAVAILABLE instead of OK.
  // Otherwise, or when that deadline passes, gRPC cancels whatever is still running (their
  // reactors finish with CANCELLED) and closes connections at once.
  const auto deadline = Clock::now() + grace;
  const bool all_ended = handler_->WaitForNoCalls(deadline);
  auto stop_at = std::chrono::system_clock::now();
  if (all_ended) {
    // system_clock's tick differs between standard libraries (libstdc++: ns, libc++: us).
    stop_at += std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::min<Clock::duration>(deadline - Clock::now(), kConnectionCloseWait));
  }
  server_->Shutdown(stop_at);
}

void GrpcServer::CancelIdleStreams(std::chrono::steady_clock::time_point now) {
  handler_->CancelIdleStreams(now);
}

void GrpcServer::LogSuppressed(bool all) { handler_->LogSuppressed(all); }

}  // namespace embstore::server
