// UTC timestamps in RFC 3339 form, for log lines and table metadata.
#ifndef EMBSTORE_COMMON_TIMESTAMP_H_
#define EMBSTORE_COMMON_TIMESTAMP_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace embstore {

// "2026-12-01T08:19:30Z" (whole seconds since the epoch).
std::string Rfc3339Utc(std::int64_t unix_seconds);

// "2026-12-01T08:19:30.123Z": `t` with milliseconds, as log lines carry.
std::string Rfc3339UtcMillis(std::chrono::system_clock::time_point t);

}  // namespace embstore

#endif  // EMBSTORE_COMMON_TIMESTAMP_H_
