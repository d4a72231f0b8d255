// How the `embstore` binary is put together: each subcommand lives in its own cmd_*.cc file and
// registers itself with a Register* function listed in main.cc.
//
// Exit codes (the same for every subcommand, documented in `embstore --help`):
//   0  success
//   1  the data was bad or an operation failed (corrupt file, bad input text, server error)
//   2  usage error (unknown flag, missing argument, invalid option value)
#ifndef EMBSTORE_CLI_COMMAND_H_
#define EMBSTORE_CLI_COMMAND_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// What a subcommand runs once its flags are parsed. Returns the process exit code.
using RunFn = std::function<int()>;

// Adds a subcommand to `app` and returns the function that runs it.
using RegisterFn = RunFn (*)(CLI::App& app);

// A library's message in the CLI's terms (embstore/common/option_names.h): the options it names
// in backquotes (`overwrite`, `on_overflow`, `tls.cert_file`) become the flags that set them
// (--force, --on-overflow, --tls-cert). Other backquoted text stays as it is.
std::string InFlagTerms(std::string_view message);

// Prints "embstore <command>: <status message>" (InFlagTerms) to stderr and returns the exit
// code for `st`: kExitUsage for InvalidArgument, kExitFailure otherwise.
int ReportError(const std::string& command, const Status& st);

// True when stderr is a terminal (progress bars are drawn only then).
bool StderrIsTty();

// Checks of numeric flags whose messages say what was wanted ("must be a positive number, not
// 0"), where CLI11's own print the range of a double.
extern const CLI::Validator kPositiveNumber;
extern const CLI::Validator kNonNegativeNumber;

RunFn RegisterInspect(CLI::App& app);
RunFn RegisterVerify(CLI::App& app);
RunFn RegisterExport(CLI::App& app);
RunFn RegisterConvert(CLI::App& app);
RunFn RegisterServe(CLI::App& app);
RunFn RegisterPull(CLI::App& app);
RunFn RegisterLs(CLI::App& app);
RunFn RegisterHealth(CLI::App& app);

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_COMMAND_H_
