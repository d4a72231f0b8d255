// Private: Handler, the embstore.v1.EmbStore service as gRPC calls it. It admits calls (drain
// state, bearer token, stream limit), parses requests, calls Service, turns Status into gRPC
// status codes, and records every call in the metrics and the log.
//
// Every method is registered "raw" (ByteBuffer in, ByteBuffer out) on the callback API: requests
// are parsed here so that a malformed one is INVALID_ARGUMENT with a message, and row chunks are
// serialized by SerializationTraits<OutgoingRowChunk> so that their payload is never copied
// (zero_copy.h). StreamRows and StreamKeys are one stream reactor (grpc_handler.cc) that differs
// only in the request, the cursor and the chunk encoding.
//
// Thread safety: gRPC calls the handlers concurrently, and every method is safe to call from any
// thread. The Service, Metrics and ServerConfig given to the constructor must outlive the
// Handler, and the Handler must outlive the grpc::Server it is registered with.
#ifndef EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_HANDLER_H_
#define EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_HANDLER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "../log_rate_limiter.h"
#include "../metrics.h"
#include "../service.h"
#include "embstore/common/status.h"
#include "embstore/server/config.h"
#include "embstore/v1/embstore.grpc.pb.h"

namespace embstore::server {

using RawEmbStoreService = v1::EmbStore::WithRawCallbackMethod_ListTables<
    v1::EmbStore::WithRawCallbackMethod_DescribeTable<
        v1::EmbStore::WithRawCallbackMethod_StreamRows<v1::EmbStore::WithRawCallbackMethod_Lookup<
            v1::EmbStore::WithRawCallbackMethod_StreamKeys<
                v1::EmbStore::WithRawCallbackMethod_RowHashes<v1::EmbStore::Service>>>>>>;

class StreamBase;  // a streaming call in progress (grpc_handler.cc)

class Handler final : public RawEmbStoreService {
 public:
  using Clock = std::chrono::steady_clock;

  // The name `Service` is taken inside Handler by the generated base class.
  Handler(::embstore::server::Service* service, Metrics* metrics, const ServerConfig& config);

  // From now on every call is refused with UNAVAILABLE; calls in flight go on.
  void set_draining() { draining_.store(true); }

  // Waits until no call is in flight or `deadline` passes; true when none is.
  bool WaitForNoCalls(Clock::time_point deadline);

  // Cancels every stream whose message in flight has waited for the client since before
  // `now - stream_idle_timeout`; a no-op when the timeout is 0.
  void CancelIdleStreams(Clock::time_point now);

  // Logs how many failed-call lines were dropped, for keys that went quiet (every key, with
  // `all`), so no count is lost when a flood stops.
  void LogSuppressed(bool all);

  // The RPCs.
  grpc::ServerUnaryReactor* ListTables(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* DescribeTable(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                   grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* RowHashes(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamRows(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* req) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamKeys(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* req) override;

  // What the calls themselves use (grpc_handler.cc).

  // Calls between arrival and their final status, of every method.
  void CallStarted() { in_flight_.fetch_add(1); }
  void CallEnded();

  // Checks what every call must pass before any work: the server is not draining, and the
  // caller presented an accepted bearer token when tokens are configured.
  Status Admit(grpc::CallbackServerContext* ctx) const;

  // A slot of max_concurrent_streams; false at the limit.
  bool TryAcquireStream();
  void ReleaseStream();
  Status StreamLimitStatus() const;

  // Counts a finished call in the metrics and writes its `rpc` log line (failed calls rate
  // limited per code, method and client address).
  void Record(const char* method, grpc::CallbackServerContext* ctx, const std::string& table,
              const grpc::Status& st, Clock::time_point start, std::uint64_t bytes);

  ::embstore::server::Service* service() { return service_; }
  std::chrono::milliseconds stream_idle_timeout() const { return config_.stream_idle_timeout; }

  // Streams that hold a slot, for CancelIdleStreams. A stream registers once it holds its slot
  // and unregisters in OnDone, before it is deleted.
  void Register(StreamBase* s);
  void Unregister(StreamBase* s);

 private:
  template <typename Req, typename Resp, typename Fn>
  grpc::ServerUnaryReactor* Unary(const char* method, grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* raw, grpc::ByteBuffer* response, Fn fn);

  ::embstore::server::Service* service_;
  Metrics* metrics_;
  const ServerConfig& config_;
  std::mutex streams_mu_;  // held while a stream is examined, so OnDone cannot delete it then
  std::set<StreamBase*> streams_;
  LogRateLimiter failed_call_lines_;
  std::atomic<bool> draining_{false};
  std::atomic<std::int64_t> active_streams_{0};
  std::atomic<std::int64_t> in_flight_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_HANDLER_H_
