// Private: the client's bridge between gRPC and embstore's Status.
#ifndef EMBSTORE_CLIENT_GRPC_UTIL_H_
#define EMBSTORE_CLIENT_GRPC_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "embstore/client/client.h"
#include "embstore/v1/embstore.grpc.pb.h"

namespace embstore::client::internal {

// A gRPC status as an embstore Status whose message names the server.
Status FromGrpc(const grpc::Status& s, const std::string& target);

// Failures worth retrying: the server or the connection went away, or the server shed load.
bool Transient(grpc::StatusCode code);

// Once per process, before the first connection: keeps a once-per-process side effect of absl
// from turning a gRPC connect in progress into a failure (grpc_util.cc says how). Client::Connect
// and the health check call it.
void SettleClockBeforeConnecting();

// Checks the target (embstore/common/address.h: host:port with a port gRPC will not wrap,
// unix:PATH, dns:...).
Status CheckTarget(const std::string& target);

// The channel credentials ConnectOptions asks for: TLS (reading its CA, certificate and key
// files) or insecure; sets the TLS server-name override in `args`.
Result<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(const ConnectOptions& o,
                                                                   grpc::ChannelArguments* args);

// Adds the bearer token and a deadline: `deadline` when given, else the unary RPC timeout for
// unary calls, else none.
void PrepareContext(grpc::ClientContext* ctx, const ConnectOptions& o,
                    std::optional<std::chrono::steady_clock::time_point> deadline, bool unary);

// Once per process, when a client connects and before the first row stream: asks glibc to keep
// freed memory for reuse (grpc_util.cc says why; a sync's lookups and hash replies are read the
// same way). Does nothing where the user tuned glibc's allocator or another
// allocator is in use.
void KeepReceiveBuffersForReuse();

}  // namespace embstore::client::internal

namespace embstore::client {

struct Client::Impl {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments base_args;
  std::shared_ptr<grpc::Channel> control;  // unary calls share one connection
  std::unique_ptr<v1::EmbStore::Stub> stub;

  // A channel on its own connection, so parallel streams are not multiplexed onto one TCP
  // connection (one connection is bounded by one core's worth of HTTP/2 framing).
  std::shared_ptr<grpc::Channel> NewChannel(const std::string& target) const {
    grpc::ChannelArguments args = base_args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    internal::KeepReceiveBuffersForReuse();
    return grpc::CreateCustomChannel(target, creds, args);
  }

  // The connection of parallel stream `index`, kept for later loads of this client (a chunked
  // load makes one Load() per chunk). `fresh` replaces it with a new connection, after a failure
  // (gRPC's reconnect backoff on the old one would otherwise delay the retry).
  std::shared_ptr<grpc::Channel> StreamChannel(const std::string& target, int index, bool fresh) {
    std::lock_guard<std::mutex> lock(stream_channels_mu);
    if (stream_channels.size() <= static_cast<std::size_t>(index)) {
      stream_channels.resize(index + 1);
    }
    auto& c = stream_channels[index];
    if (!c || fresh) c = NewChannel(target);
    return c;
  }

  std::mutex stream_channels_mu;
  std::vector<std::shared_ptr<grpc::Channel>> stream_channels;
};

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_GRPC_UTIL_H_
