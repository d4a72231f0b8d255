// Structured logging for the server: one JSON object per line on stderr.
//
// Every line has "ts" (RFC 3339 UTC with milliseconds), "level" and "msg"; the caller adds fields,
// e.g. {"ts":"2026-11-30T09:00:00.123Z","level":"info","msg":"table loaded","table":"words",
// "generation":3}. Lines are written whole (one write per line) so concurrent loggers never
// interleave. Messages below the configured level are dropped before they are formatted.
//
// Thread safety: all functions are safe to call from any thread.
#ifndef EMBSTORE_SERVER_LOG_H_
#define EMBSTORE_SERVER_LOG_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Accepts "debug", "info", "warn", "error".
Status SetLogLevel(std::string_view level);
bool LogEnabled(LogLevel level);

// `fields` must be a JSON object (or null); its members are added to the line.
void Log(LogLevel level, std::string_view msg, const nlohmann::json& fields = nullptr);

// Hands every line (without its newline) to `sink` instead of writing it to stderr; an empty
// function restores stderr. For tests that read the log. `sink` may be called from any thread,
// one line at a time.
void SetLogSink(std::function<void(std::string_view line)> sink);

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_LOG_H_
