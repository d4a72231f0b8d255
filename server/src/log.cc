#include "embstore/server/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "embstore/common/timestamp.h"

namespace embstore::server {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<bool> g_has_sink{false};
std::mutex g_sink_mu;  // guards g_sink and serializes calls to it
std::function<void(std::string_view)> g_sink;

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

std::string Now() { return Rfc3339UtcMillis(std::chrono::system_clock::now()); }

}  // namespace

Status SetLogLevel(std::string_view level) {
  for (LogLevel l : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (level == LevelName(l)) {
      g_level.store(static_cast<int>(l));
      return Status::OK();
    }
  }
  return Status::InvalidArgument("log level '" + std::string(level) +
                                 "' is not one of debug, info, warn, error");
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void Log(LogLevel level, std::string_view msg, const nlohmann::json& fields) {
  if (!LogEnabled(level)) return;
  nlohmann::ordered_json line;
  line["ts"] = Now();
  line["level"] = LevelName(level);
  line["msg"] = msg;
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) line[it.key()] = it.value();
  }
  // Invalid UTF-8 (e.g. a table name from a client) is replaced, never a throw.
  std::string out = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (g_has_sink.load()) {
    std::lock_guard<std::mutex> lock(g_sink_mu);
    if (g_sink) {
      g_sink(out);
      return;
    }
  }
  out.push_back('\n');
  const char* p = out.data();
  std::size_t left = out.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void SetLogSink(std::function<void(std::string_view line)> sink) {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  g_sink = std::move(sink);
  g_has_sink.store(static_cast<bool>(g_sink));
}

}  // namespace embstore::server
