// The lifecycle of a Server: checking the configuration, starting the parts in order (catalog,
// service, gRPC server, housekeeping, metrics endpoint), and stopping them in the reverse order
// after a drain. The parts themselves live elsewhere: catalog.h, service.h, transport/ (the only
// code that includes gRPC) and metrics_endpoint.h.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "catalog.h"
#include "embstore/common/address.h"
#include "embstore/common/mapping_guard.h"
#include "embstore/server/log.h"
#include "embstore/server/server.h"
#include "embstore/store/simd.h"
#include "heap_trim.h"
#include "metrics.h"
#include "metrics_endpoint.h"
#include "server_internal.h"
#include "service.h"
#include "transport/grpc_server.h"

namespace embstore::server {
namespace {

using Clock = std::chrono::steady_clock;

// Free resident heap memory below this is left to glibc (it is reused soon enough). A trim takes
// well under a millisecond and runs at most once a second, only after the heap grew.
constexpr std::uint64_t kHeapTrimThreshold = 1u << 20;

// Configuration mistakes that no part would report as clearly by itself.
Status CheckConfig(const ServerConfig& config) {
  if (config.listen.empty()) return Status::InvalidArgument("no `listen` address given");
  for (const std::string& a : config.listen) {
    // gRPC would wrap a port past 65535 ("127.0.0.1:70000" listens on 4464).
    EMBSTORE_RETURN_NOT_OK(ParseAddress(a, AddressUse::kListen, "listen address").status());
  }
  if (config.tls.cert_file.empty() != config.tls.key_file.empty()) {
    return Status::InvalidArgument("TLS needs both a certificate and a key file");
  }
  if (!config.tls.client_ca_file.empty() && config.tls.cert_file.empty()) {
    return Status::InvalidArgument(
        "client certificates (a client CA) need TLS: give a server "
        "certificate and key too");
  }
  if (config.service.default_chunk_bytes > config.service.max_chunk_bytes) {
    return Status::InvalidArgument("default chunk size " +
                                   std::to_string(config.service.default_chunk_bytes) +
                                   " is larger than the maximum chunk size " +
                                   std::to_string(config.service.max_chunk_bytes));
  }
  for (const auto& t : config.auth_tokens) {
    if (t.empty()) return Status::InvalidArgument("an empty bearer token is not allowed");
  }
  if (config.max_transport_memory_bytes > 0 &&
      config.max_transport_memory_bytes < config.max_receive_message_bytes) {
    return Status::InvalidArgument("transport memory limit " +
                                   std::to_string(config.max_transport_memory_bytes) +
                                   " is smaller than the largest request accepted, " +
                                   std::to_string(config.max_receive_message_bytes) + " bytes");
  }
  return Status::OK();
}

class ServerImpl final : public Server {
 public:
  explicit ServerImpl(const ServerConfig& config) : config_(config) {}

  ~ServerImpl() override { Shutdown(std::chrono::milliseconds(0)); }

  Status Init() {
    EMBSTORE_RETURN_NOT_OK(SetLogLevel(config_.log_level));
    EMBSTORE_RETURN_NOT_OK(CheckConfig(config_));
    FixHeapThresholds();

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
    std::shared_ptr<Catalog> cat = catalog_;
    metrics_.SetGaugeSource([cat] {
      return std::map<std::string, double>{
          {"embstore_tables", static_cast<double>(cat->List().size())},
          {"embstore_mapping_faults_absorbed",
           static_cast<double>(MappingGuard::TotalFaultsAbsorbed())}};
    });

    EMBSTORE_ASSIGN_OR_RETURN(grpc_, GrpcServer::Start(config_, service_.get(), &metrics_));
    housekeeper_ = std::thread([this] { Housekeep(); });
    if (!config_.metrics_listen.empty()) {
      EMBSTORE_ASSIGN_OR_RETURN(metrics_endpoint_,
                                MetricsEndpoint::Start(config_.metrics_listen, &metrics_));
    }
    Log(LogLevel::kInfo, "listening",
        {{"addresses", grpc_->addresses()},
         {"metrics_port", metrics_port()},
         {"store", catalog_->dir()},
         {"tables", catalog_->List().size()},
         {"tls", !config_.tls.cert_file.empty()},
         {"client_certs", !config_.tls.client_ca_file.empty()},
         {"auth", !config_.auth_tokens.empty()},
         {"simd", std::string(store::simd::IsaName(store::simd::ActiveIsa()))}});
    return Status::OK();
  }

  const std::vector<std::string>& addresses() const override { return grpc_->addresses(); }
  int metrics_port() const override { return metrics_endpoint_ ? metrics_endpoint_->port() : 0; }
  Status RefreshCatalog() override { return catalog_->Refresh(); }
  std::string RenderMetrics() const override { return metrics_.RenderPrometheus(); }
  Catalog& catalog() { return *catalog_; }

  void BeginDrain() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || grpc_ == nullptr) return;
    draining_ = true;
    grpc_->BeginDrain();
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
    if (grpc_ != nullptr) grpc_->Shutdown(grace);
    {
      std::lock_guard<std::mutex> lock(housekeeping_mu_);
      stop_housekeeping_ = true;
    }
    housekeeping_cv_.notify_all();
    if (housekeeper_.joinable()) housekeeper_.join();
    if (metrics_endpoint_) metrics_endpoint_->Stop();
    if (catalog_) catalog_->StopWatching();
    if (grpc_) grpc_->LogSuppressed(/*all=*/true);
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
      grpc_->CancelIdleStreams(now);
      grpc_->LogSuppressed(/*all=*/false);
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

  // Declared in the order they start; destroyed in reverse, each after what uses it.
  const ServerConfig config_;
  Metrics metrics_;
  std::shared_ptr<Catalog> catalog_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<GrpcServer> grpc_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
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
  auto s = std::make_unique<ServerImpl>(config);
  EMBSTORE_RETURN_NOT_OK(s->Init());
  return std::unique_ptr<Server>(std::move(s));
}

Catalog& CatalogOf(Server& server) { return static_cast<ServerImpl&>(server).catalog(); }

}  // namespace embstore::server
