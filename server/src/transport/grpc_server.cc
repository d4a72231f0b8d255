// The gRPC edge of the server: the only code that includes gRPC besides the other files of this
// directory. It admits calls (drain state, bearer token, stream limit), parses requests, calls
// Service, and turns Status into gRPC status codes.
//
// Every EmbStore method is registered "raw" (ByteBuffer in, ByteBuffer out) on the callback API:
// requests are parsed here so that a malformed one is INVALID_ARGUMENT with a message, and row
// chunks are serialized by SerializationTraits<OutgoingRowChunk> so that their payload is never
// copied (zero_copy.h).
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "../heap_trim.h"
#include "../log_rate_limiter.h"
#include "embstore/common/mapping_guard.h"
#include "../metrics.h"
#include "embstore/server/log.h"
#include "embstore/server/server.h"
#include "embstore/v1/embstore.grpc.pb.h"
#include "status_map.h"
#include "zero_copy.h"

namespace embstore::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kServiceName = "embstore.v1.EmbStore";

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

template <typename Req>
Status ParseRequest(const grpc::ByteBuffer* raw, const char* method, Req* out) {
  grpc::ByteBuffer copy(*raw);  // shares the slices; Deserialize consumes its argument
  grpc::Status s = grpc::SerializationTraits<Req>::Deserialize(&copy, out);
  if (!s.ok()) {
    return Status::InvalidArgument(std::string("malformed ") + method +
                                   " request: not a valid embstore.v1." +
                                   Req::descriptor()->name() + " message");
  }
  return Status::OK();
}

template <typename Req>
std::string TableOf(const Req& r) {
  if constexpr (requires { r.table(); }) {
    return r.table();
  } else {
    return std::string();
  }
}

// The client's address without its port ("ipv4:10.1.2.3:51234" -> "ipv4:10.1.2.3"): every
// connection of a client has its own port.
std::string ClientAddress(const std::string& peer) {
  if (peer.rfind("ipv4:", 0) == 0 || peer.rfind("ipv6:", 0) == 0) {
    const auto colon = peer.rfind(':');
    if (colon > 5) return peer.substr(0, colon);
  }
  return peer;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

// The protocol logic; the name `Service` is taken inside Handler by the generated base class.
using StoreService = ::embstore::server::Service;

using RawService = v1::EmbStore::WithRawCallbackMethod_ListTables<
    v1::EmbStore::WithRawCallbackMethod_DescribeTable<
        v1::EmbStore::WithRawCallbackMethod_StreamRows<v1::EmbStore::WithRawCallbackMethod_Lookup<
            v1::EmbStore::WithRawCallbackMethod_StreamKeys<v1::EmbStore::Service>>>>>;

class StreamBase;

class Handler final : public RawService {
 public:
  Handler(StoreService* service, Metrics* metrics, const ServerConfig& config)
      : service_(service),
        metrics_(metrics),
        config_(config),
        failed_call_lines_(config.log_repeat_interval) {}

  void set_draining() { draining_.store(true); }

  // Calls between arrival and their final status, of every method.
  void CallStarted() { in_flight_.fetch_add(1); }
  void CallEnded() {
    if (in_flight_.fetch_sub(1) == 1) {
      // Taking the mutex orders this notification after a waiter's check of the count.
      std::lock_guard<std::mutex> lock(idle_mu_);
      idle_cv_.notify_all();
    }
  }
  // Waits until no call is in flight or `deadline` passes; true when none is.
  bool WaitForNoCalls(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(idle_mu_);
    return idle_cv_.wait_until(lock, deadline, [this] { return in_flight_.load() == 0; });
  }

  // Checks what every call must pass before any work: the server is not draining, and the
  // caller presented an accepted bearer token when tokens are configured.
  Status Admit(grpc::CallbackServerContext* ctx) const {
    if (draining_.load()) return Status::Unavailable("server is shutting down; retry elsewhere");
    if (config_.auth_tokens.empty()) return Status::OK();
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    if (it == md.end()) {
      return Status::Unauthenticated(
          "missing bearer token: send metadata 'authorization: Bearer "
          "<token>'");
    }
    std::string_view value(it->second.data(), it->second.size());
    constexpr std::string_view kScheme = "Bearer ";
    if (value.size() < kScheme.size() ||
        !std::equal(kScheme.begin(), kScheme.end(), value.begin(),
                    [](char a, char b) { return std::tolower(a) == std::tolower(b); })) {
      return Status::Unauthenticated("authorization metadata is not of the form 'Bearer <token>'");
    }
    value.remove_prefix(kScheme.size());
    bool ok = false;
    for (const auto& t : config_.auth_tokens) ok |= ConstantTimeEquals(value, t);
    if (!ok) return Status::Unauthenticated("bearer token not accepted");
    return Status::OK();
  }

  bool TryAcquireStream() {
    std::int64_t cur = active_streams_.load();
    while (cur < static_cast<std::int64_t>(config_.max_concurrent_streams)) {
      if (active_streams_.compare_exchange_weak(cur, cur + 1)) {
        metrics_->StreamStarted();
        return true;
      }
    }
    return false;
  }
  void ReleaseStream() {
    active_streams_.fetch_sub(1);
    metrics_->StreamFinished();
  }
  Status StreamLimitStatus() const {
    return Status::ResourceExhausted("server is at its limit of " +
                                     std::to_string(config_.max_concurrent_streams) +
                                     " concurrent streams; retry later");
  }

  void Record(const char* method, grpc::CallbackServerContext* ctx, const std::string& table,
              const grpc::Status& st, Clock::time_point start, std::uint64_t bytes) {
    const double secs = SecondsSince(start);
    metrics_->RecordRequest(method, GrpcCodeName(st.error_code()), secs);
    if (bytes > 0 && !table.empty()) metrics_->AddBytesServed(table, bytes);
    const LogLevel level = st.ok() ? LogLevel::kInfo : LogLevel::kWarn;
    if (!LogEnabled(level)) return;
    const std::string peer = ctx->peer();
    std::uint64_t suppressed = 0;
    if (!st.ok()) {
      // A client failing in a loop (no token, a table that is not there) would write a line a
      // call; similar lines are limited per code, method and client address.
      auto verdict = failed_call_lines_.Admit(std::string("rpc ") + GrpcCodeName(st.error_code()) +
                                              " " + method + " " + ClientAddress(peer));
      if (!verdict.write) return;
      suppressed = verdict.suppressed;
    }
    nlohmann::json f = {{"method", method},
                        {"code", GrpcCodeName(st.error_code())},
                        {"ms", secs * 1000.0},
                        {"peer", peer}};
    if (!table.empty()) f["table"] = table;
    if (bytes > 0) f["bytes"] = bytes;
    if (!st.ok()) f["error"] = st.error_message();
    if (suppressed > 0) f["suppressed"] = suppressed;
    Log(level, "rpc", f);
  }

  // Logs how many failed-call lines were dropped, for keys that went quiet (every key, with
  // `all`), so no count is lost when a flood stops.
  void LogSuppressed(bool all) {
    for (const auto& s : failed_call_lines_.TakeSuppressed(all)) {
      Log(LogLevel::kWarn, "similar lines suppressed",
          {{"key", s.key},
           {"suppressed", s.count},
           {"interval_ms", failed_call_lines_.interval().count()}});
    }
  }

  template <typename Req, typename Resp, typename Fn>
  grpc::ServerUnaryReactor* Unary(const char* method, grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* raw, grpc::ByteBuffer* response, Fn fn) {
    const auto start = Clock::now();
    CallStarted();
    Req request;
    Status st = Admit(ctx);
    if (st.ok()) st = ParseRequest(raw, method, &request);
    if (st.ok()) {
      Result<Resp> r = fn(request);
      if (r.ok()) {
        bool own = false;
        grpc::Status ss = grpc::SerializationTraits<Resp>::Serialize(*r, response, &own);
        if (!ss.ok()) {
          st = Status::Internal(std::string("serializing the reply: ") + ss.error_message());
        }
      } else {
        st = r.status();
      }
    }
    grpc::Status gs = ToGrpcStatus(st);
    Record(method, ctx, TableOf(request), gs, start, 0);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(gs);
    CallEnded();
    return reactor;
  }

  grpc::ServerUnaryReactor* ListTables(grpc::CallbackServerContext* ctx,
                                       const grpc::ByteBuffer* req,
                                       grpc::ByteBuffer* resp) override {
    return Unary<v1::ListTablesRequest, v1::ListTablesResponse>(
        "ListTables", ctx, req, resp, [this](const auto& r) { return service_->ListTables(r); });
  }
  grpc::ServerUnaryReactor* DescribeTable(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req,
                                          grpc::ByteBuffer* resp) override {
    return Unary<v1::DescribeTableRequest, v1::TableInfo>(
        "DescribeTable", ctx, req, resp,
        [this](const auto& r) { return service_->DescribeTable(r); });
  }
  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
                                   grpc::ByteBuffer* resp) override {
    return Unary<v1::LookupRequest, v1::LookupResponse>(
        "Lookup", ctx, req, resp, [this](const auto& r) { return service_->Lookup(r); });
  }

  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamRows(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* req) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamKeys(grpc::CallbackServerContext* ctx,
                                                         const grpc::ByteBuffer* req) override;

  StoreService* service() { return service_; }
  std::chrono::milliseconds stream_idle_timeout() const { return config_.stream_idle_timeout; }

  // Streams that hold a slot, for CancelIdleStreams. A stream registers once it holds its slot
  // and unregisters in OnDone, before it is deleted.
  void Register(StreamBase* s) {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_.insert(s);
  }
  void Unregister(StreamBase* s) {
    std::lock_guard<std::mutex> lock(streams_mu_);
    streams_.erase(s);
  }
  // Cancels every stream whose message in flight has waited for the client since before
  // `now - stream_idle_timeout`; a no-op when the timeout is 0.
  void CancelIdleStreams(Clock::time_point now);

 private:
  StoreService* service_;
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

// What the two streaming reactors share apart from their request type: one write in flight at
// a time, the idle watchdog's view of that write, and the bookkeeping when the call ends.
class StreamBase : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  StreamBase(Handler* h, grpc::CallbackServerContext* ctx, const char* method)
      : h_(h), ctx_(ctx), method_(method), start_(Clock::now()) {
    h_->CallStarted();
  }

  void OnWriteDone(bool ok) override {
    write_started_ns_.store(0);
    if (!ok) {
      // The client is gone (cancelled, disconnected, or the server is past its shutdown
      // deadline), or the idle watchdog cancelled the call. Nothing more is queued for it.
      if (idle_cancelled_.load()) {
        FinishWith(Status::Cancelled(
            "stream cancelled by the server: the client took no data for " +
            std::to_string(h_->stream_idle_timeout().count()) + " ms (stream_idle_timeout_ms)"));
      } else {
        FinishWith(Status::Cancelled("client went away mid-stream"));
      }
      return;
    }
    bytes_ += pending_bytes_;
    pending_bytes_ = 0;
    Pump();
  }

  void OnDone() override {
    if (registered_) h_->Unregister(this);
    h_->Record(method_, ctx_, table_, final_, start_, bytes_);
    if (holds_slot_) h_->ReleaseStream();
    h_->CallEnded();
    delete this;
  }

  // Called by Handler::CancelIdleStreams with the registry locked, so the call is alive.
  void CancelIfIdle(Clock::time_point now, std::chrono::milliseconds timeout) {
    const std::int64_t started = write_started_ns_.load();
    if (started == 0 || idle_cancelled_.load()) return;
    const auto waited = now - Clock::time_point(Clock::duration(started));
    if (waited < timeout) return;
    idle_cancelled_.store(true);
    Log(LogLevel::kWarn, "stream idle timeout",
        {{"method", method_},
         {"table", table_},
         {"peer", ctx_->peer()},
         {"waited_ms", std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()},
         {"timeout_ms", timeout.count()},
         {"bytes", bytes_sent_.load()}});
    ctx_->TryCancel();  // the pending write fails: OnWriteDone(false)
  }

 protected:
  virtual Status Fill(grpc::ByteBuffer* buf, std::uint64_t* payload_bytes) = 0;

  // Takes a stream slot and registers with the watchdog; false (call finished) at the limit.
  bool AcquireSlot() {
    if (!h_->TryAcquireStream()) {
      FinishWith(h_->StreamLimitStatus());
      return false;
    }
    holds_slot_ = true;
    h_->Register(this);
    registered_ = true;
    return true;
  }

  void Pump() {
    Status st = Fill(&buf_, &pending_bytes_);
    if (!st.ok()) {
      FinishWith(st);
    } else if (done_) {
      FinishWith(Status::OK());
    } else {
      bytes_sent_.store(bytes_);
      write_started_ns_.store(Clock::now().time_since_epoch().count());
      StartWrite(&buf_);
    }
  }

  void FinishWith(const Status& st) {
    final_ = ToGrpcStatus(st);
    Finish(final_);
  }

  Handler* h_;
  grpc::CallbackServerContext* ctx_;
  const char* method_;
  Clock::time_point start_;
  std::string table_;     // set before the stream registers
  grpc::ByteBuffer buf_;  // the message being written; valid until OnWriteDone
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t bytes_ = 0;
  bool holds_slot_ = false;
  bool registered_ = false;
  bool done_ = false;
  grpc::Status final_;
  // Read by the watchdog thread: when the write in flight started (steady clock ticks; 0 when
  // none is), whether the watchdog cancelled the call, and the bytes sent before that write.
  std::atomic<std::int64_t> write_started_ns_{0};
  std::atomic<bool> idle_cancelled_{false};
  std::atomic<std::uint64_t> bytes_sent_{0};
};

void Handler::CancelIdleStreams(Clock::time_point now) {
  const auto timeout = config_.stream_idle_timeout;
  if (timeout.count() <= 0) return;
  std::lock_guard<std::mutex> lock(streams_mu_);
  for (StreamBase* s : streams_) s->CancelIfIdle(now, timeout);
}

// Admission and parsing of a streaming request of type `Req`.
template <typename Req>
class StreamReactor : public StreamBase {
 public:
  using StreamBase::StreamBase;

 protected:
  // Runs admission and parsing; true when the derived class may open its stream.
  bool Begin(const grpc::ByteBuffer* raw) {
    Status st = h_->Admit(ctx_);
    if (st.ok()) st = ParseRequest(raw, method_, &request_);
    table_ = TableOf(request_);
    if (!st.ok()) {
      FinishWith(st);
      return false;
    }
    return AcquireSlot();
  }

  Req request_;
};

class RowsReactor final : public StreamReactor<v1::StreamRowsRequest> {
 public:
  RowsReactor(Handler* h, grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw)
      : StreamReactor(h, ctx, "StreamRows") {
    if (!Begin(raw)) return;
    auto s = h->service()->StreamRows(request_);
    if (!s.ok()) {
      FinishWith(s.status());
      return;
    }
    stream_ = std::move(s).value();
    Pump();
  }

  Status Fill(grpc::ByteBuffer* buf, std::uint64_t* payload_bytes) override {
    EMBSTORE_ASSIGN_OR_RETURN(auto next, stream_->Next());
    if (!next.has_value()) {
      done_ = true;
      return Status::OK();
    }
    *payload_bytes = next->payload.size();
    OutgoingRowChunk out = OutgoingRowChunk::From(std::move(*next));
    bool own = false;
    buf->Clear();
    grpc::Status s = grpc::SerializationTraits<OutgoingRowChunk>::Serialize(out, buf, &own);
    if (!s.ok()) return Status::Internal("encoding a row chunk: " + s.error_message());
    return Status::OK();
  }

 private:
  std::unique_ptr<RowStream> stream_;
};

class KeysReactor final : public StreamReactor<v1::StreamKeysRequest> {
 public:
  KeysReactor(Handler* h, grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw)
      : StreamReactor(h, ctx, "StreamKeys") {
    if (!Begin(raw)) return;
    auto s = h->service()->StreamKeys(request_);
    if (!s.ok()) {
      FinishWith(s.status());
      return;
    }
    stream_ = std::move(s).value();
    Pump();
  }

  Status Fill(grpc::ByteBuffer* buf, std::uint64_t* payload_bytes) override {
    EMBSTORE_ASSIGN_OR_RETURN(auto next, stream_->Next());
    if (!next.has_value()) {
      done_ = true;
      return Status::OK();
    }
    *payload_bytes = next->key_data().size();
    bool own = false;
    buf->Clear();
    grpc::Status s = grpc::SerializationTraits<v1::KeyChunk>::Serialize(*next, buf, &own);
    if (!s.ok()) return Status::Internal("encoding a key chunk: " + s.error_message());
    return Status::OK();
  }

 private:
  std::unique_ptr<KeyStream> stream_;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* Handler::StreamRows(grpc::CallbackServerContext* ctx,
                                                                const grpc::ByteBuffer* req) {
  return new RowsReactor(this, ctx, req);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* Handler::StreamKeys(grpc::CallbackServerContext* ctx,
                                                                const grpc::ByteBuffer* req) {
  return new KeysReactor(this, ctx, req);
}

Result<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::FromErrno(std::string(what) + " " + path, errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "host:port" -> (host, port). Brackets around IPv6 hosts are removed.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& addr, const char* what) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument(std::string(what) + " '" + addr + "' is not HOST:PORT");
  }
  std::string host = addr.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = -1;
  try {
    std::size_t used = 0;
    port = std::stoi(addr.substr(colon + 1), &used);
    if (used != addr.size() - colon - 1) port = -1;
  } catch (const std::exception&) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return Status::InvalidArgument(std::string(what) + " '" + addr + "' has no valid port");
  }
  return std::make_pair(host, port);
}

class GrpcServer final : public Server {
 public:
  explicit GrpcServer(const ServerConfig& config) : config_(config) {}

  ~GrpcServer() override { Shutdown(std::chrono::milliseconds(0)); }

  Status Init() {
    EMBSTORE_RETURN_NOT_OK(SetLogLevel(config_.log_level));
    if (config_.listen.empty()) return Status::InvalidArgument("no --listen address given");
    if (config_.tls.cert_file.empty() != config_.tls.key_file.empty()) {
      return Status::InvalidArgument("TLS needs both a certificate and a key file");
    }
    if (!config_.tls.client_ca_file.empty() && config_.tls.cert_file.empty()) {
      return Status::InvalidArgument(
          "client certificates (a client CA) need TLS: give a server "
          "certificate and key too");
    }
    if (config_.service.default_chunk_bytes > config_.service.max_chunk_bytes) {
      return Status::InvalidArgument("default chunk size " +
                                     std::to_string(config_.service.default_chunk_bytes) +
                                     " is larger than the maximum chunk size " +
                                     std::to_string(config_.service.max_chunk_bytes));
    }
    for (const auto& t : config_.auth_tokens) {
      if (t.empty()) return Status::InvalidArgument("an empty bearer token is not allowed");
    }
    if (config_.max_transport_memory_bytes > 0 &&
        config_.max_transport_memory_bytes < config_.max_receive_message_bytes) {
      return Status::InvalidArgument("transport memory limit " +
                                     std::to_string(config_.max_transport_memory_bytes) +
                                     " is smaller than the largest request accepted, " +
                                     std::to_string(config_.max_receive_message_bytes) + " bytes");
    }

    CatalogOptions co;
    co.dir = config_.store_dir;
    co.poll_interval = config_.poll_interval;
    co.verify_on_load = config_.verify_on_load;
    Metrics* metrics = &metrics_;
    EMBSTORE_ASSIGN_OR_RETURN(
        auto catalog, Catalog::Open(co, [metrics](const std::string& name, const std::string& path,
                                                  std::uint64_t generation, const Status& st) {
          if (st.ok()) {
            metrics->RecordCatalogEvent("loaded");
            Log(LogLevel::kInfo, "table loaded",
                {{"table", name}, {"path", path}, {"generation", generation}});
          } else if (st.IsNotFound()) {
            metrics->RecordCatalogEvent("removed");
            Log(LogLevel::kInfo, "table removed", {{"table", name}, {"path", path}});
          } else {
            metrics->RecordCatalogEvent("rejected");
            Log(LogLevel::kError, "table file rejected",
                {{"table", name}, {"path", path}, {"error", st.ToString()}});
          }
        }));
    catalog_ = std::shared_ptr<Catalog>(std::move(catalog));
    catalog_->Watch();
    service_ = std::make_unique<Service>(catalog_, config_.service);
    handler_ = std::make_unique<Handler>(service_.get(), &metrics_, config_);
    std::shared_ptr<Catalog> cat = catalog_;
    metrics_.SetGaugeSource([cat] {
      return std::map<std::string, double>{
          {"embstore_tables", static_cast<double>(cat->List().size())},
          {"embstore_mapping_faults_absorbed",
           static_cast<double>(MappingGuard::TotalFaultsAbsorbed())}};
    });

    std::shared_ptr<grpc::ServerCredentials> creds;
    if (!config_.tls.cert_file.empty()) {
      grpc::SslServerCredentialsOptions ssl(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
      EMBSTORE_ASSIGN_OR_RETURN(auto cert, ReadFile(config_.tls.cert_file, "TLS certificate"));
      EMBSTORE_ASSIGN_OR_RETURN(auto key, ReadFile(config_.tls.key_file, "TLS key"));
      ssl.pem_key_cert_pairs.push_back({key, cert});
      if (!config_.tls.client_ca_file.empty()) {
        EMBSTORE_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                                  ReadFile(config_.tls.client_ca_file, "client CA"));
        ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
      }
      creds = grpc::SslServerCredentials(ssl);
    } else {
      creds = grpc::InsecureServerCredentials();
    }

    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    ports_.assign(config_.listen.size(), 0);
    for (std::size_t i = 0; i < config_.listen.size(); ++i) {
      builder.AddListeningPort(config_.listen[i], creds, &ports_[i]);
    }
    builder.RegisterService(handler_.get());
    builder.SetMaxReceiveMessageSize(
        static_cast<int>(std::min<std::uint64_t>(config_.max_receive_message_bytes, INT32_MAX)));
    if (config_.max_transport_memory_bytes > 0) {
      // gRPC checks the receive limit only once a request has arrived whole, so without a quota
      // every client could make the server buffer a request of any size. Over the quota, gRPC
      // closes idle connections and then cancels calls (RESOURCE_EXHAUSTED) to get back under.
      grpc::ResourceQuota quota("embstore");
      quota.Resize(static_cast<std::size_t>(config_.max_transport_memory_bytes));
      builder.SetResourceQuota(quota);
    }
    const auto& ka = config_.keepalive;
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
    server_ = builder.BuildAndStart();
    if (server_ == nullptr) {
      return Status::IOError("could not start the gRPC server on " + JoinListen() +
                             " (address in use, bad address, or unreadable TLS files)");
    }
    for (std::size_t i = 0; i < config_.listen.size(); ++i) {
      const std::string& a = config_.listen[i];
      if (a.rfind("unix:", 0) == 0 || a.rfind("unix-abstract:", 0) == 0) {
        addresses_.push_back(a);
        continue;
      }
      if (ports_[i] == 0) {
        server_->Shutdown();
        return Status::IOError("could not listen on " + a);
      }
      auto colon = a.rfind(':');
      addresses_.push_back(a.substr(0, colon + 1) + std::to_string(ports_[i]));
    }
    auto* health = server_->GetHealthCheckService();
    health->SetServingStatus(true);
    health->SetServingStatus(kServiceName, true);

    housekeeper_ = std::thread([this] { Housekeep(); });
    if (!config_.metrics_listen.empty()) EMBSTORE_RETURN_NOT_OK(StartMetrics());
    Log(LogLevel::kInfo, "listening",
        {{"addresses", addresses_},
         {"metrics_port", metrics_port_},
         {"store", catalog_->dir()},
         {"tables", catalog_->List().size()},
         {"tls", !config_.tls.cert_file.empty()},
         {"client_certs", !config_.tls.client_ca_file.empty()},
         {"auth", !config_.auth_tokens.empty()}});
    return Status::OK();
  }

  const std::vector<std::string>& addresses() const override { return addresses_; }
  int metrics_port() const override { return metrics_port_; }
  Catalog& catalog() override { return *catalog_; }
  std::string RenderMetrics() const override { return metrics_.RenderPrometheus(); }

  void BeginDrain() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || server_ == nullptr) return;
    draining_ = true;
    handler_->set_draining();
    server_->GetHealthCheckService()->SetServingStatus(false);
    Log(LogLevel::kInfo, "draining", {{"active_streams", metrics_.active_streams()}});
  }

  void Shutdown(std::chrono::milliseconds grace) override {
    BeginDrain();
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (shutdown_started_) {
        done_cv_.wait(lock, [this] { return shut_down_; });
        return;
      }
      shutdown_started_ = true;
    }
    if (server_ != nullptr) {
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
        stop_at += std::min<Clock::duration>(deadline - Clock::now(), kConnectionCloseWait);
      }
      server_->Shutdown(stop_at);
    }
    {
      std::lock_guard<std::mutex> lock(housekeeping_mu_);
      stop_housekeeping_ = true;
    }
    housekeeping_cv_.notify_all();
    if (housekeeper_.joinable()) housekeeper_.join();
    if (http_) http_->stop();
    if (http_thread_.joinable()) http_thread_.join();
    if (catalog_) catalog_->StopWatching();
    if (handler_) handler_->LogSuppressed(/*all=*/true);
    Log(LogLevel::kInfo, "stopped", nullptr);
    {
      std::lock_guard<std::mutex> lock(mu_);
      shut_down_ = true;
    }
    done_cv_.notify_all();
  }

  void Wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return shut_down_; });
  }

 private:
  std::string JoinListen() const {
    std::string s;
    for (const auto& a : config_.listen) s += (s.empty() ? "" : ", ") + a;
    return s;
  }

  // The server's periodic chores, on one thread: cancelling streams whose client stopped
  // taking data, reporting the counts of suppressed log lines, and giving freed heap memory
  // back to the kernel (about once a second). Runs until Shutdown.
  void Housekeep() {
    const auto idle = config_.stream_idle_timeout;
    // Often enough that a stalled stream is cancelled within a quarter of the timeout after it
    // expires.
    const auto period = idle.count() > 0 ? std::clamp(idle / 4, std::chrono::milliseconds(10),
                                                      std::chrono::milliseconds(1000))
                                         : std::chrono::milliseconds(1000);
    HeapTrimmer trimmer(kHeapTrimThreshold);
    auto next_trim = Clock::now();
    std::unique_lock<std::mutex> lock(housekeeping_mu_);
    while (!housekeeping_cv_.wait_for(lock, period, [this] { return stop_housekeeping_; })) {
      lock.unlock();
      const auto now = Clock::now();
      handler_->CancelIdleStreams(now);
      handler_->LogSuppressed(/*all=*/false);
      if (now >= next_trim) {
        next_trim = now + std::chrono::seconds(1);
        const std::uint64_t released = trimmer.MaybeTrim();
        if (released > 0) {
          Log(LogLevel::kDebug, "heap trimmed", {{"released_bytes", released}});
        }
      }
      lock.lock();
    }
  }

  // At most this long (and never past the grace period) connections may take to close once
  // every call has ended.
  static constexpr std::chrono::seconds kConnectionCloseWait{1};

  // Free heap memory below this is left to glibc (it is reused soon enough).
  static constexpr std::uint64_t kHeapTrimThreshold = 16u << 20;

  Status StartMetrics() {
    EMBSTORE_ASSIGN_OR_RETURN(auto hp, SplitHostPort(config_.metrics_listen, "metrics address"));
    http_ = std::make_unique<httplib::Server>();
    // One request per connection. httplib's stop() waits for every connection thread, and a
    // kept-alive connection (Prometheus keeps them) would hold the shutdown for up to the
    // keep-alive timeout; a connection opened but still silent holds it for up to this timeout.
    http_->set_keep_alive_max_count(1);
    http_->set_keep_alive_timeout(1);
    Metrics* m = &metrics_;
    http_->Get("/metrics", [m](const httplib::Request&, httplib::Response& res) {
      res.set_content(m->RenderPrometheus(), "text/plain; version=0.0.4; charset=utf-8");
    });
    if (hp.second == 0) {
      metrics_port_ = http_->bind_to_any_port(hp.first);
    } else {
      metrics_port_ = http_->bind_to_port(hp.first, hp.second) ? hp.second : -1;
    }
    if (metrics_port_ <= 0) {
      metrics_port_ = 0;
      return Status::IOError("could not listen for metrics on " + config_.metrics_listen);
    }
    httplib::Server* srv = http_.get();
    http_thread_ = std::thread([srv] { srv->listen_after_bind(); });
    return Status::OK();
  }

  ServerConfig config_;
  Metrics metrics_;
  std::shared_ptr<Catalog> catalog_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<Handler> handler_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<int> ports_;
  std::vector<std::string> addresses_;
  std::unique_ptr<httplib::Server> http_;
  std::thread http_thread_;
  int metrics_port_ = 0;
  std::thread housekeeper_;
  std::mutex housekeeping_mu_;
  std::condition_variable housekeeping_cv_;
  bool stop_housekeeping_ = false;

  std::mutex mu_;
  std::condition_variable done_cv_;
  bool draining_ = false;
  bool shutdown_started_ = false;
  bool shut_down_ = false;
};

}  // namespace

Result<std::unique_ptr<Server>> Server::Start(const ServerConfig& config) {
  auto s = std::make_unique<GrpcServer>(config);
  EMBSTORE_RETURN_NOT_OK(s->Init());
  return std::unique_ptr<Server>(std::move(s));
}

}  // namespace embstore::server
