// `embstore serve`: serves the tables of a directory over gRPC until SIGTERM or SIGINT.
#include <signal.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "command.h"
#include "embstore/objstore/mirror.h"
#include "embstore/server/log.h"
#include "embstore/server/server.h"
#include "object_paths.h"

namespace embstore::cli {
namespace {

// The flags of `embstore serve`: one per ServerConfig setting that has a flag
// (server::ConfigOptions()), and those of the s3:// mirror and the config file.
struct ServeFlags {
  std::string cache;
  double store_poll_s = 60;
  std::string config_file;
  // What the setting flags gave, applied over the config file in the order they were given.
  std::vector<std::function<Status(server::ServerConfig&)>> given;
};

// Adds the flag of one setting: its value, checked as the table says, goes to the config when
// BuildConfig runs.
void AddSettingFlag(CLI::App* sub, const server::ConfigOption& o, ServeFlags* f) {
  using Check = server::ConfigOption::Check;
  std::string help(o.help);
  const std::string fallback = server::FormatOptionValue(o, server::ServerConfig());
  if (!fallback.empty() && fallback != "false") help += " (default " + fallback + ")";
  const std::string flag(o.flag);
  std::visit(
      [&](auto field) {
        using T = std::decay_t<decltype(field(std::declval<server::ServerConfig&>()))>;
        if constexpr (std::is_same_v<T, bool>) {
          auto set = [field](server::ServerConfig& c) {
            field(c) = true;
            return Status::OK();
          };
          sub->add_flag_callback(
              flag, [f, set] { f->given.push_back(set); }, help);
        } else {
          using Value =
              std::conditional_t<std::is_same_v<T, std::chrono::milliseconds>, std::int64_t, T>;
          CLI::Option* opt = sub->add_option_function<Value>(
              flag,
              [f, field, token_file = o.token_file, flag](const Value& v) {
                f->given.push_back([field, token_file, v, flag](server::ServerConfig& c) {
                  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
                    // --auth-token-file: the tokens of the file replace the config file's.
                    if (token_file) {
                      field(c).clear();
                      return server::LoadTokenFile(v.front(), &field(c));
                    }
                  }
                  field(c) = T(v);
                  return Status::OK();
                });
              },
              help);
          if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            if (o.token_file) opt->expected(1);
          }
          if (o.check == Check::kPositive) opt->check(kPositiveNumber);
          if (o.check == Check::kExistingFile) opt->check(CLI::ExistingFile);
          if constexpr (std::is_arithmetic_v<Value> && !std::is_same_v<Value, bool>) {
            if (o.check != Check::kPositive) opt->check(kNonNegativeNumber);
          }
        }
      },
      o.field);
}

// Flags given on the command line win over the configuration file, which wins over defaults.
Status BuildConfig(const ServeFlags& f, server::ServerConfig* c) {
  if (!f.config_file.empty()) EMBSTORE_RETURN_NOT_OK(server::LoadConfigFile(f.config_file, c));
  for (const auto& set : f.given) EMBSTORE_RETURN_NOT_OK(set(*c));
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
                  {{"object", e.object},
                   {"path", e.path},
                   {"version", e.version},
                   {"bytes", e.bytes},
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
  EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl prefix, objstore::ParseObjectUrl(store));
  EMBSTORE_ASSIGN_OR_RETURN(auto objects, objstore::OpenObjectStore(prefix));
  objstore::MirrorOptions o;
  o.interval = std::chrono::milliseconds(static_cast<long long>(flags.store_poll_s * 1000));
  o.on_event = LogMirrorEvent;
  EMBSTORE_ASSIGN_OR_RETURN(
      auto mirror, objstore::TableMirror::Create(std::move(objects), prefix, flags.cache, o));
  auto r = mirror->Sync();
  if (!r.ok()) {
    // The bucket or folder cannot be listed now: serve what the cache holds, keep trying.
    server::Log(server::LogLevel::kWarn, "store listing failed; serving the cache",
                {{"store", store}, {"cache", flags.cache}, {"error", r.status().ToString()}});
  } else {
    server::Log(server::LogLevel::kInfo, "store synced",
                {{"store", store},
                 {"cache", flags.cache},
                 {"fetched", r->fetched},
                 {"unchanged", r->unchanged},
                 {"failed", r->failed},
                 {"removed", r->removed}});
  }
  return mirror;
}

// How long after its grace a shutdown may take before the process leaves without it.
constexpr std::chrono::milliseconds kShutdownStuck{10000};

int RunServe(const ServeFlags& flags) {
  server::ServerConfig config;
  Status st = BuildConfig(flags, &config);
  if (!st.ok()) return ReportError("serve", st);

  // Block the shutdown signals before any thread starts, so every thread inherits the mask and
  // only the sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  // --store s3://BUCKET/PREFIX or hdfs://NAMENODE/DIR: the tables are mirrored into --cache, which
  // is what the server watches; the first sync runs before the server starts, later ones on their
  // own thread.
  std::unique_ptr<objstore::TableMirror> mirror;
  if (objstore::IsObjectUrl(config.store_dir)) {
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
    server::Log(server::LogLevel::kError,
                again > 0 ? "second signal: exiting now" : "shutdown did not finish: exiting now",
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
  for (const server::ConfigOption& o : server::ConfigOptions()) {
    if (o.flag.empty()) continue;  // set in the config file only
    AddSettingFlag(sub, o, f.get());
    if (o.key == "store") {
      sub->add_option(
          "--cache", f->cache,
          "With --store s3://... or hdfs://...: directory the tables are fetched into (verified, "
          "atomically) and served from; kept across restarts");
      sub->add_option("--store-poll-s", f->store_poll_s,
                      "With --store s3://... or hdfs://...: seconds between listings of the store "
                      "for new, "
                      "replaced and removed tables (default 60)")
          ->check(kPositiveNumber);
    }
    if (o.key == "listen") {
      sub->get_option("--listen")->type_name("ADDR");
      sub->add_option("--config", f->config_file,
                      "JSON configuration file (docs/SERVING.md); flags override its values")
          ->check(CLI::ExistingFile);
    }
  }
  sub->footer(
      "Logs are JSON lines on stderr. Exit codes: 0 after a graceful shutdown; 1 when the server "
      "cannot start, or when a second SIGTERM/SIGINT (or a shutdown still running 10 s after "
      "its grace) ends it at once; 2 on usage errors.\nExample: embstore serve --store "
      "/data/tables --listen "
      "0.0.0.0:7070 --listen unix:/run/embstore.sock --metrics-listen 127.0.0.1:9090");
  return [f]() { return RunServe(*f); };
}

}  // namespace embstore::cli
