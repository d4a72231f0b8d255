// `embstore health --from TARGET [--service NAME] [--wait S]`: asks a server the standard gRPC
// health question (grpc.health.v1.Health/Check). Exit 0 when it is SERVING, 1 otherwise, so it
// serves as a container HEALTHCHECK, a Kubernetes exec probe and a systemd ExecStartPost.
#include <cstdio>

#include "client_flags.h"
#include "command.h"
#include "embstore/client/health.h"

namespace embstore::cli {

RunFn RegisterHealth(CLI::App& app) {
  struct Args {
    ClientFlags client;
    std::string service;
    double wait_s = 0;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "health", "Check a server's gRPC health (grpc.health.v1); exit 0 when it is SERVING");
  AddClientFlags(sub, &args->client);
  sub->add_option("--service", args->service,
                  "Service to ask about: \"\" (default) is the whole server; the server also "
                  "answers for embstore.v1.EmbStore");
  sub->add_option("--wait", args->wait_s,
                  "Keep asking for up to this many seconds until the server is SERVING "
                  "(default: ask once)")
      ->check(kNonNegativeNumber);
  sub->add_flag("--quiet,-q", args->quiet, "Print nothing; the exit code is the answer");
  sub->footer(
      "Exit codes: 0 SERVING; 1 NOT_SERVING, unknown, or the server cannot be reached; "
      "2 usage error.\nExample: embstore health --from unix:/run/embstore/embstore.sock");
  return [args]() {
    auto opts = ToConnectOptions(args->client);
    if (!opts.ok()) return ReportError("health", opts.status());
    if (args->wait_s > 0) {
      Status st = client::WaitUntilServing(
          *opts, args->service,
          std::chrono::milliseconds(static_cast<long long>(args->wait_s * 1000)));
      if (!st.ok()) return args->quiet ? kExitFailure : ReportError("health", st);
      if (!args->quiet) std::printf("%s: SERVING\n", opts->target.c_str());
      return kExitOk;
    }
    auto st = client::CheckHealth(*opts, args->service);
    if (!st.ok()) {
      if (args->quiet)
        return st.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
      return ReportError("health", st.status());
    }
    if (!args->quiet) {
      std::printf("%s: %s\n", opts->target.c_str(),
                  std::string(client::ServingStatusName(*st)).c_str());
    }
    return *st == client::ServingStatus::kServing ? kExitOk : kExitFailure;
  };
}

}  // namespace embstore::cli
