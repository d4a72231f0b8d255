// The `embstore` command line: one binary, one subcommand per job.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "command.h"
#include "embstore/common/atomic_file.h"
#include "embstore/common/option_names.h"
#include "embstore/store/format.h"

namespace embstore::cli {

std::string InFlagTerms(std::string_view message) {
  // Each library option a message can name, and the flag that sets it.
  static constexpr OptionName kFlags[] = {
      {"overwrite", "--force"},         {"on_overflow", "--on-overflow"},
      {"on_duplicate_key", "--on-duplicate-key"}, {"delimiter", "--delimiter"},
      {"comments", "--comments"},       {"metadata", "--meta"},
      {"format", "--format"},           {"tls.cert_file", "--tls-cert"},
      {"tls.key_file", "--tls-key"},    {"listen", "--listen"},
  };
  return InFrontEndTerms(message, kFlags);
}

int ReportError(const std::string& command, const Status& st) {
  std::fprintf(stderr, "embstore %s: %s\n", command.c_str(), InFlagTerms(st.message()).c_str());
  return st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

bool StderrIsTty() { return ::isatty(STDERR_FILENO) == 1; }

namespace {

CLI::Validator NumberAtLeast(double least, bool strictly, const char* what) {
  return CLI::Validator(
      [least, strictly, what](std::string& in) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(in, v) || !(strictly ? v > least : v >= least)) {
          return std::string("must be ") + what + ", not " + in;
        }
        return std::string();
      },
      strictly ? "POSITIVE" : "NONNEGATIVE");
}

}  // namespace

const CLI::Validator kPositiveNumber = NumberAtLeast(0, true, "a positive number");
const CLI::Validator kNonNegativeNumber = NumberAtLeast(0, false, "zero or more");

}  // namespace embstore::cli

int main(int argc, char** argv) {
  using namespace embstore::cli;
  CLI::App app{
      "embstore: convert embedding text files into memory-mapped tables, serve them to "
      "trainers over gRPC, and load them into memory.",
      "embstore"};
  app.footer(
      "Exit codes: 0 success; 1 bad data or a failed operation; 2 usage error.\n"
      "Run 'embstore COMMAND --help' for a command's options. Formats: docs/FORMAT.md.");
  app.set_version_flag("--version", std::string(embstore::store::EmbstoreVersion()));
  app.require_subcommand(1);

  const std::vector<std::pair<const char*, RegisterFn>> commands = {
      {"convert", RegisterConvert}, {"inspect", RegisterInspect}, {"verify", RegisterVerify},
      {"export", RegisterExport},   {"serve", RegisterServe},     {"pull", RegisterPull},
      {"ls", RegisterLs},           {"health", RegisterHealth},
  };
  std::vector<std::pair<CLI::App*, RunFn>> runs;
  for (const auto& [name, reg] : commands) {
    RunFn run = reg(app);
    runs.emplace_back(app.get_subcommand(name), std::move(run));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  // Ctrl-C, kill or a closed terminal during convert, pull or export: remove the partial output
  // (`serve` blocks these signals and stops gracefully instead).
  embstore::RemoveTempFilesOnSignal();
  try {
    for (auto& [sub, run] : runs) {
      if (sub->parsed()) return run();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "embstore: internal error: %s\n", e.what());
    return kExitFailure;
  }
  return kExitUsage;
}
