// Private: LogRateLimiter decides which of many similar log lines are written, so that a flood
// of failing calls (a client without a token retrying in a loop) costs a few lines, not one a
// call.
//
// Lines are grouped by a caller-chosen key. The first line of a key is written and opens an
// interval; further lines of that key within the interval are dropped and counted. The count is
// reported with the next line of the key written after the interval, or by TakeSuppressed() once
// the interval is over (for keys that went quiet) or at shutdown. So each key costs at most one
// line per interval plus one count.
//
// Memory is bounded: at most `max_keys` keys (and kOverflowKey) are tracked. When that many
// are, keys whose interval is over and that dropped nothing are forgotten; if the rest are still
// busy, lines of new keys share the one key kOverflowKey.
//
// Thread safety: all methods may be called from any thread.
#ifndef EMBSTORE_SERVER_SRC_LOG_RATE_LIMITER_H_
#define EMBSTORE_SERVER_SRC_LOG_RATE_LIMITER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace embstore::server {

class LogRateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr const char* kOverflowKey = "(other)";

  // `interval` 0 writes every line. `now` is the clock (tests pass their own).
  explicit LogRateLimiter(std::chrono::milliseconds interval, std::size_t max_keys = 1024,
                          std::function<Clock::time_point()> now = &Clock::now);

  struct Verdict {
    bool write = true;             // false: drop the line (it was counted)
    std::uint64_t suppressed = 0;  // lines of this key dropped since the last one written
  };
  Verdict Admit(const std::string& key);

  struct Suppressed {
    std::string key;
    std::uint64_t count = 0;
  };
  // The keys that dropped lines and whose interval is over (every key that dropped lines, with
  // `all`), with their counts; those keys are then forgotten, so their next line is written.
  std::vector<Suppressed> TakeSuppressed(bool all = false);

  std::chrono::milliseconds interval() const { return interval_; }

 private:
  struct Entry {
    Clock::time_point opened;  // when the interval began: the last line written
    std::uint64_t dropped = 0;
  };
  bool Over(const Entry& e, Clock::time_point now) const { return now - e.opened >= interval_; }

  const std::chrono::milliseconds interval_;
  const std::size_t max_keys_;
  const std::function<Clock::time_point()> now_;
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_LOG_RATE_LIMITER_H_
