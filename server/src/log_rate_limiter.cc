#include "log_rate_limiter.h"

#include <utility>

namespace embstore::server {

LogRateLimiter::LogRateLimiter(std::chrono::milliseconds interval, std::size_t max_keys,
                               std::function<Clock::time_point()> now)
    : interval_(interval), max_keys_(max_keys < 1 ? 1 : max_keys), now_(std::move(now)) {}

LogRateLimiter::Verdict LogRateLimiter::Admit(const std::string& key) {
  if (interval_.count() <= 0) return {};
  const Clock::time_point now = now_();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_keys_) {
      std::erase_if(entries_,
                    [&](const auto& kv) { return kv.second.dropped == 0 && Over(kv.second, now); });
    }
    const std::string k = entries_.size() < max_keys_ ? key : std::string(kOverflowKey);
    it = entries_.find(k);
    if (it == entries_.end()) {
      entries_.emplace(k, Entry{now, 0});
      return {};
    }
  }
  Entry& e = it->second;
  if (!Over(e, now)) {
    ++e.dropped;
    return {.write = false, .suppressed = 0};
  }
  Verdict v{.write = true, .suppressed = e.dropped};
  e = Entry{now, 0};
  return v;
}

std::vector<LogRateLimiter::Suppressed> LogRateLimiter::TakeSuppressed(bool all) {
  std::vector<Suppressed> out;
  if (interval_.count() <= 0) return out;
  const Clock::time_point now = now_();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const bool over = Over(it->second, now);
    if (it->second.dropped > 0 && (all || over)) {
      out.push_back({it->first, it->second.dropped});
      it = entries_.erase(it);
    } else if (over) {
      it = entries_.erase(it);  // nothing to report, and its next line is written anyway
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace embstore::server
