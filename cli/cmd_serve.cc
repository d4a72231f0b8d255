// `embstore serve`: serves the tables of a directory over gRPC until SIGTERM or SIGINT.
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "command.h"
#include "object_paths.h"
#include "embstore/objstore/mirror.h"
#include "embstore/server/log.h"
#include "embstore/server/server.h"

namespace embstore::cli {
namespace {

struct ServeFlags {
  std::string store;
  std::string cache;
  double store_poll_s = 60;
  std::vector<std::string> listen;
  std::string config_file;
  std::string metrics_listen;
  std::int64_t poll_interval_ms = 0;
  std::int64_t shutdown_grace_ms = 0;
  std::int64_t stream_idle_timeout_ms = 0;
  bool verify_on_load = false;
  std::uint32_t max_streams = 0;
  std::uint64_t max_lookup_batch = 0;
  std::uint64_t default_chunk_bytes = 0;
  std::uint64_t max_chunk_bytes = 0;
  std::uint64_t max_receive_message_bytes = 0;
  std::uint64_t max_transport_memory_bytes = 0;
  std::int64_t keepalive_time_ms = 0;
  std::int64_t keepalive_timeout_ms = 0;
  std::string tls_cert, tls_key, tls_client_ca;
  std::string auth_token_file;
  std::string log_level;
};

// Flags given on the command line win over the configuration file, which wins over defaults.
Status BuildConfig(CLI::App* sub, const ServeFlags& f, server::ServerConfig* c) {
  if (!f.config_file.empty()) EMBSTORE_RETURN_NOT_OK(server::LoadConfigFile(f.config_file, c));
  auto given = [sub](const char* name) { return sub->count(name) > 0; };
  if (given("--store")) c->store_dir = f.store;
  if (given("--listen")) c->listen = f.listen;
  if (given("--metrics-listen")) c->metrics_listen = f.metrics_listen;
  if (given("--poll-interval-ms")) c->poll_interval = std::chrono::milliseconds(f.poll_interval_ms);
  if (given("--shutdown-grace-ms")) {
    c->shutdown_grace = std::chrono::milliseconds(f.shutdown_grace_ms);
  }
  if (given("--stream-idle-timeout-ms")) {
    c->stream_idle_timeout = std::chrono::milliseconds(f.stream_idle_timeout_ms);
  }
  if (given("--verify-on-load")) c->verify_on_load = f.verify_on_load;
  if (given("--max-streams")) c->max_concurrent_streams = f.max_streams;
  if (given("--max-lookup-batch")) c->service.max_lookup_batch = f.max_lookup_batch;
  if (given("--default-chunk-bytes")) c->service.default_chunk_bytes = f.default_chunk_bytes;
  if (given("--max-chunk-bytes")) c->service.max_chunk_bytes = f.max_chunk_bytes;
  if (given("--max-receive-message-bytes")) {
    c->max_receive_message_bytes = f.max_receive_message_bytes;
  }
  if (given("--max-transport-memory-bytes")) {
    c->max_transport_memory_bytes = f.max_transport_memory_bytes;
  }
  if (given("--keepalive-time-ms")) c->keepalive.time_ms = f.keepalive_time_ms;
  if (given("--keepalive-timeout-ms")) c->keepalive.timeout_ms = f.keepalive_timeout_ms;
  if (given("--tls-cert")) c->tls.cert_file = f.tls_cert;
  if (given("--tls-key")) c->tls.key_file = f.tls_key;
  if (given("--tls-client-ca")) c->tls.client_ca_file = f.tls_client_ca;
  if (given("--auth-token-file")) {
    c->auth_tokens.clear();
    EMBSTORE_RETURN_NOT_OK(server::LoadTokenFile(f.auth_token_file, &c->auth_tokens));
  }
  if (given("--log-level")) c->log_level = f.log_level;
  if (c->store_dir.empty()) {
    return Status::InvalidArgument(
        "no store directory: give --store DIR or \"store\" in the "
        "config file");
  }
  if (c->listen.empty()) {
    return Status::InvalidArgument(
        "no listen address: give --listen ADDR or \"listen\" in the "
        "config file");
  }
  return Status::OK();
}

void LogMirrorEvent(const objstore::MirrorEvent& e) {
  using Kind = objstore::MirrorEvent::Kind;
  switch (e.kind) {
    case Kind::kFetched:
      server::Log(server::LogLevel::kInfo, "table fetched",
                  {{"object", e.object}, {"path", e.path}, {"etag", e.etag}, {"bytes", e.bytes},
                   {"seconds", e.seconds}});
      break;
    case Kind::kRemoved:
      server::Log(server::LogLevel::kInfo, "cached table removed",
                  {{"object", e.object}, {"path", e.path}});
      break;
    case Kind::kFailed:
      server::Log(server::LogLevel::kWarn, "fetch failed",
                  {{"object", e.object}, {"error", e.error.ToString()}});
      break;
    case Kind::kUnchanged:
      break;
  }
}

Result<std::unique_ptr<objstore::TableMirror>> StartMirror(const std::string& store,
                                                           const ServeFlags& flags) {
  if (flags.cache.empty()) {
    return Status::InvalidArgument("--store " + store +
                                   " needs --cache DIR: the tables are fetched there and served "
                                   "from there");
  }
  EMBSTORE_ASSIGN_OR_RETURN(objstore::S3Url prefix, objstore::ParseS3Url(store));
  EMBSTORE_ASSIGN_OR_RETURN(auto s3, S3FromEnvironment());
  objstore::MirrorOptions o;
  o.interval = std::chrono::milliseconds(static_cast<long long>(flags.store_poll_s * 1000));
  o.on_event = LogMirrorEvent;
  EMBSTORE_ASSIGN_OR_RETURN(auto mirror, objstore::TableMirror::Create(std::move(s3), prefix,
                                                                        flags.cache, o));
  auto r = mirror->Sync();
  if (!r.ok()) {
    // The bucket cannot be listed now: serve what the cache holds, keep trying.
    server::Log(server::LogLevel::kWarn, "store listing failed; serving the cache",
                {{"store", store}, {"cache", flags.cache}, {"error", r.status().ToString()}});
  } else {
    server::Log(server::LogLevel::kInfo, "store synced",
                {{"store", store}, {"cache", flags.cache}, {"fetched", r->fetched},
                 {"unchanged", r->unchanged}, {"failed", r->failed}, {"removed", r->removed}});
  }
  return mirror;
}

// How long after its grace a shutdown may take before the process leaves without it.
constexpr std::chrono::milliseconds kShutdownStuck{10000};

int RunServe(CLI::App* sub, const ServeFlags& flags) {
  server::ServerConfig config;
  Status st = BuildConfig(sub, flags, &config);
  if (!st.ok()) return ReportError("serve", st);

  // Block the shutdown signals before any thread starts, so every thread inherits the mask and
  // only the sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // --store s3://BUCKET/PREFIX: the tables are mirrored into --cache, which is what the server
  // watches; the first sync runs before the server starts, later ones on their own thread.
  std::unique_ptr<objstore::TableMirror> mirror;
  if (objstore::IsS3Url(config.store_dir)) {
    auto m = StartMirror(config.store_dir, flags);
    if (!m.ok()) return ReportError("serve", m.status());
    mirror = std::move(m).value();
    config.store_dir = flags.cache;
  }
  auto srv = server::Server::Start(config);
  if (!srv.ok()) return ReportError("serve", srv.status());
  if (mirror) mirror->Start();
  int sig = 0;
  sigwait(&signals, &sig);
  server::Log(server::LogLevel::kInfo, "shutdown requested",
              {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"},
               {"grace_ms", config.shutdown_grace.count()}});
  // A shutdown waits for the calls in flight after the grace has cancelled them. One that does
  // not end (a read stuck on a failing disk or network file system) must not keep the process
  // up: a second signal, or kShutdownStuck past the grace, ends it at once.
  std::thread([signals, limit = config.shutdown_grace + kShutdownStuck] {
    timespec ts{static_cast<time_t>(limit.count() / 1000),
                static_cast<long>(limit.count() % 1000) * 1000000L};
    const int again = sigtimedwait(&signals, nullptr, &ts);
    server::Log(server::LogLevel::kError, again > 0 ? "second signal: exiting now"
                                                    : "shutdown did not finish: exiting now",
                {{"waited_ms", limit.count()}});
    std::fflush(nullptr);
    std::_Exit(kExitFailure);
  }).detach();
  if (mirror) mirror->Stop();
  (*srv)->Shutdown(config.shutdown_grace);
  // Everything the server owned is stopped and its last log line written. Leave without running
  // gRPC's global teardown, which can wait up to 10 s for connection objects of clients that
  // were cut off by the shutdown.
  std::fflush(nullptr);
  std::_Exit(kExitOk);
}

}  // namespace

RunFn RegisterServe(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "serve",
      "Serve every *.emb table of a directory over gRPC (embstore.v1; docs/PROTOCOL.md). New, "
      "replaced and removed files are picked up while running. Stops gracefully on SIGTERM or "
      "SIGINT.");
  auto f = std::make_shared<ServeFlags>();
  sub->add_option("--store", f->store,
                  "Directory whose *.emb files are served (read only), or s3://BUCKET/PREFIX "
                  "(its *.emb objects, mirrored into --cache)");
  sub->add_option("--cache", f->cache,
                  "With --store s3://...: directory the tables are fetched into (verified, "
                  "atomically) and served from; kept across restarts");
  sub->add_option("--store-poll-s", f->store_poll_s,
                  "With --store s3://...: seconds between listings of the bucket for new, "
                  "replaced and removed tables (default 60)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--listen", f->listen,
                  "Address to serve on: HOST:PORT (port 0 picks a free one) or unix:PATH; "
                  "repeat for several")
      ->type_name("ADDR");
  sub->add_option("--config", f->config_file,
                  "JSON configuration file (docs/SERVING.md); flags override its values")
      ->check(CLI::ExistingFile);
  sub->add_option("--metrics-listen", f->metrics_listen,
                  "HOST:PORT for Prometheus metrics at GET /metrics (default: off)");
  sub->add_option("--poll-interval-ms", f->poll_interval_ms,
                  "How often the directory is rescanned for changed files (default 1000)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--shutdown-grace-ms", f->shutdown_grace_ms,
                  "On SIGTERM/SIGINT, how long streams in flight may run before they are "
                  "cancelled (default 10000)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--stream-idle-timeout-ms", f->stream_idle_timeout_ms,
                  "Cancel a stream whose client has taken no data for this long, freeing its "
                  "--max-streams slot; 0 never (default 60000)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--verify-on-load", f->verify_on_load,
                "Check every block checksum of a file before serving it");
  sub->add_option("--max-streams", f->max_streams,
                  "Most concurrent StreamRows/StreamKeys calls (default 256)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-lookup-batch", f->max_lookup_batch,
                  "Most rows or keys in one Lookup (default 16384)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--default-chunk-bytes", f->default_chunk_bytes,
                  "Chunk payload size when a client does not ask (default 1048576)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-chunk-bytes", f->max_chunk_bytes,
                  "Largest chunk payload a client may ask for (default 4128768, which fits "
                  "the 4 MiB default receive limit of gRPC clients)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-receive-message-bytes", f->max_receive_message_bytes,
                  "Largest request message accepted, RESOURCE_EXHAUSTED above (default 4194304, "
                  "room for 100,000 keys of 38 bytes)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-transport-memory-bytes", f->max_transport_memory_bytes,
                  "Memory gRPC may hold for connections and requests being received, all "
                  "clients together; bounds what floods of oversized requests cost (gRPC reads "
                  "a request whole before it checks its size). 0: no bound (default 134217728)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--keepalive-time-ms", f->keepalive_time_ms,
                  "Ping idle connections this often (default 60000)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--keepalive-timeout-ms", f->keepalive_timeout_ms,
                  "Close a connection whose ping is not answered within this (default 20000)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--tls-cert", f->tls_cert, "PEM server certificate chain (turns TLS on)")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-key", f->tls_key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-client-ca", f->tls_client_ca,
                  "PEM CA bundle; clients must present a certificate signed by it")
      ->check(CLI::ExistingFile);
  sub->add_option("--auth-token-file", f->auth_token_file,
                  "File of accepted bearer tokens, one a line; clients must send "
                  "'authorization: Bearer <token>'")
      ->check(CLI::ExistingFile);
  sub->add_option("--log-level", f->log_level, "debug, info, warn or error (default info)");
  sub->footer(
      "Logs are JSON lines on stderr. Exit codes: 0 after a graceful shutdown; 1 when the server "
      "cannot start, or when a second SIGTERM/SIGINT (or a shutdown still running 10 s after "
      "its grace) ends it at once; 2 on usage errors.\nExample: embstore serve --store /data/tables --listen "
      "0.0.0.0:7070 --listen unix:/run/embstore.sock --metrics-listen 127.0.0.1:9090");
  return [sub, f]() { return RunServe(sub, *f); };
}

}  // namespace embstore::cli
