#include "embstore/common/timestamp.h"

#include <cstdio>
#include <ctime>

namespace embstore {
namespace {

std::string Format(std::int64_t seconds, int millis) {
  const std::time_t t = static_cast<std::time_t>(seconds);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[48];
  if (millis < 0) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  }
  return buf;
}

}  // namespace

std::string Rfc3339Utc(std::int64_t unix_seconds) { return Format(unix_seconds, -1); }

std::string Rfc3339UtcMillis(std::chrono::system_clock::time_point t) {
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  // Floor division, so times before the epoch keep a non-negative millisecond part.
  std::int64_t seconds = ms / 1000;
  std::int64_t rest = ms % 1000;
  if (rest < 0) {
    rest += 1000;
    seconds -= 1;
  }
  return Format(seconds, static_cast<int>(rest));
}

}  // namespace embstore
