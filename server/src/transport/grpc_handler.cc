#include "grpc_handler.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <string_view>
#include <type_traits>
#include <utility>

#include "embstore/server/log.h"
#include "status_map.h"
#include "zero_copy.h"

namespace embstore::server {
namespace {

using Clock = Handler::Clock;
using StoreService = ::embstore::server::Service;

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

}  // namespace

// What every streaming call does whatever it streams: one write in flight at a time, the idle
// watchdog's view of that write, and the bookkeeping when the call ends. StreamCall<Method>
// below supplies the request and the chunks.
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
  // Encodes the next message into `buf` and its payload size into `payload_bytes`, or sets
  // done_ after the last one.
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

namespace {

// What tells the two streaming methods apart: the request, the Service call that opens the
// cursor, and how a chunk of it becomes the message on the wire.
struct StreamRowsMethod {
  using Request = v1::StreamRowsRequest;
  using Cursor = RowStream;
  static constexpr const char* kName = "StreamRows";
  static constexpr const char* kChunk = "a row chunk";
  static Result<std::unique_ptr<Cursor>> Open(const StoreService& s, const Request& r) {
    return s.StreamRows(r);
  }
  static std::uint64_t PayloadBytes(const RowChunkView& c) { return c.payload.size(); }
  // The payload leaves straight from the mapping (zero_copy.h).
  static OutgoingRowChunk Outgoing(RowChunkView& c) { return OutgoingRowChunk::From(std::move(c)); }
};

struct StreamKeysMethod {
  using Request = v1::StreamKeysRequest;
  using Cursor = KeyStream;
  static constexpr const char* kName = "StreamKeys";
  static constexpr const char* kChunk = "a key chunk";
  static Result<std::unique_ptr<Cursor>> Open(const StoreService& s, const Request& r) {
    return s.StreamKeys(r);
  }
  static std::uint64_t PayloadBytes(const v1::KeyChunk& c) { return c.key_data().size(); }
  static const v1::KeyChunk& Outgoing(const v1::KeyChunk& c) { return c; }
};

// One streaming call of `Method`: admission, parsing, a stream slot, then the cursor's chunks
// one write at a time. Deletes itself when gRPC is done with it (StreamBase::OnDone).
template <typename Method>
class StreamCall final : public StreamBase {
 public:
  StreamCall(Handler* h, grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* raw)
      : StreamBase(h, ctx, Method::kName) {
    Status st = h_->Admit(ctx_);
    if (st.ok()) st = ParseRequest(raw, method_, &request_);
    table_ = TableOf(request_);
    if (!st.ok()) {
      FinishWith(st);
      return;
    }
    if (!AcquireSlot()) return;
    auto s = Method::Open(*h_->service(), request_);
    if (!s.ok()) {
      FinishWith(s.status());
      return;
    }
    cursor_ = std::move(s).value();
    Pump();
  }

 private:
  Status Fill(grpc::ByteBuffer* buf, std::uint64_t* payload_bytes) override {
    EMBSTORE_ASSIGN_OR_RETURN(auto next, cursor_->Next());
    if (!next.has_value()) {
      done_ = true;
      return Status::OK();
    }
    *payload_bytes = Method::PayloadBytes(*next);
    decltype(auto) out = Method::Outgoing(*next);
    using Message = std::remove_cvref_t<decltype(out)>;
    bool own = false;
    buf->Clear();
    grpc::Status s = grpc::SerializationTraits<Message>::Serialize(out, buf, &own);
    if (!s.ok()) {
      return Status::Internal(std::string("encoding ") + Method::kChunk + ": " + s.error_message());
    }
    return Status::OK();
  }

  typename Method::Request request_;
  std::unique_ptr<typename Method::Cursor> cursor_;
};

}  // namespace

Handler::Handler(StoreService* service, Metrics* metrics, const ServerConfig& config)
    : service_(service),
      metrics_(metrics),
      config_(config),
      failed_call_lines_(config.log_repeat_interval) {}

void Handler::CallEnded() {
  if (in_flight_.fetch_sub(1) == 1) {
    // Taking the mutex orders this notification after a waiter's check of the count.
    std::lock_guard<std::mutex> lock(idle_mu_);
    idle_cv_.notify_all();
  }
}

bool Handler::WaitForNoCalls(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(idle_mu_);
  return idle_cv_.wait_until(lock, deadline, [this] { return in_flight_.load() == 0; });
}

Status Handler::Admit(grpc::CallbackServerContext* ctx) const {
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

bool Handler::TryAcquireStream() {
  std::int64_t cur = active_streams_.load();
  while (cur < static_cast<std::int64_t>(config_.max_concurrent_streams)) {
    if (active_streams_.compare_exchange_weak(cur, cur + 1)) {
      metrics_->StreamStarted();
      return true;
    }
  }
  return false;
}

void Handler::ReleaseStream() {
  active_streams_.fetch_sub(1);
  metrics_->StreamFinished();
}

Status Handler::StreamLimitStatus() const {
  return Status::ResourceExhausted("server is at its limit of " +
                                   std::to_string(config_.max_concurrent_streams) +
                                   " concurrent streams; retry later");
}

void Handler::Record(const char* method, grpc::CallbackServerContext* ctx,
                     const std::string& table, const grpc::Status& st, Clock::time_point start,
                     std::uint64_t bytes) {
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

void Handler::LogSuppressed(bool all) {
  for (const auto& s : failed_call_lines_.TakeSuppressed(all)) {
    Log(LogLevel::kWarn, "similar lines suppressed",
        {{"key", s.key},
         {"suppressed", s.count},
         {"interval_ms", failed_call_lines_.interval().count()}});
  }
}

void Handler::Register(StreamBase* s) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.insert(s);
}

void Handler::Unregister(StreamBase* s) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.erase(s);
}

void Handler::CancelIdleStreams(Clock::time_point now) {
  const auto timeout = config_.stream_idle_timeout;
  if (timeout.count() <= 0) return;
  std::lock_guard<std::mutex> lock(streams_mu_);
  for (StreamBase* s : streams_) s->CancelIfIdle(now, timeout);
}

template <typename Req, typename Resp, typename Fn>
grpc::ServerUnaryReactor* Handler::Unary(const char* method, grpc::CallbackServerContext* ctx,
                                         const grpc::ByteBuffer* raw, grpc::ByteBuffer* response,
                                         Fn fn) {
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

grpc::ServerUnaryReactor* Handler::ListTables(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* req,
                                              grpc::ByteBuffer* resp) {
  return Unary<v1::ListTablesRequest, v1::ListTablesResponse>(
      "ListTables", ctx, req, resp, [this](const auto& r) { return service_->ListTables(r); });
}

grpc::ServerUnaryReactor* Handler::DescribeTable(grpc::CallbackServerContext* ctx,
                                                 const grpc::ByteBuffer* req,
                                                 grpc::ByteBuffer* resp) {
  return Unary<v1::DescribeTableRequest, v1::TableInfo>(
      "DescribeTable", ctx, req, resp,
      [this](const auto& r) { return service_->DescribeTable(r); });
}

grpc::ServerUnaryReactor* Handler::Lookup(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  // The rows' bytes leave in the buffer they were gathered into (zero_copy.h).
  return Unary<v1::LookupRequest, LookupReply>(
      "Lookup", ctx, req, resp, [this](const auto& r) { return service_->Lookup(r); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* Handler::StreamRows(grpc::CallbackServerContext* ctx,
                                                                const grpc::ByteBuffer* req) {
  return new StreamCall<StreamRowsMethod>(this, ctx, req);
}

grpc::ServerUnaryReactor* Handler::RowHashes(grpc::CallbackServerContext* ctx,
                                             const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  return Unary<v1::RowHashesRequest, v1::RowHashesResponse>(
      "RowHashes", ctx, req, resp, [this](const auto& r) { return service_->RowHashes(r); });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* Handler::StreamKeys(grpc::CallbackServerContext* ctx,
                                                                const grpc::ByteBuffer* req) {
  return new StreamCall<StreamKeysMethod>(this, ctx, req);
}

}  // namespace embstore::server
