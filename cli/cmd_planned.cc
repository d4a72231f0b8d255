// Subcommands whose implementation has not landed in this build yet. Each is listed in --help
// with its purpose and fails clearly (exit 1) instead of pretending to work.
#include <cstdio>

#include "command.h"

namespace embstore::cli {
namespace {

RunFn Unavailable(CLI::App& app, const char* name, const char* description) {
  CLI::App* sub = app.add_subcommand(name, std::string(description) + " (not in this build yet)");
  sub->allow_extras();
  return [name]() {
    std::fprintf(stderr, "embstore %s: this command is not available in this build yet\n", name);
    return kExitFailure;
  };
}

}  // namespace

RunFn RegisterPull(CLI::App& app) {
  return Unavailable(app, "pull", "Download a table from a server");
}
RunFn RegisterLs(CLI::App& app) {
  return Unavailable(app, "ls", "List the tables a server offers");
}

}  // namespace embstore::cli
