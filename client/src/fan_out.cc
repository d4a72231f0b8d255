#include "fan_out.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace embstore::client::internal {

void FanOut::Post(LoadEvent e) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back(std::move(e));
  cv_.notify_all();
}

void FanOut::Fail(Status st) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = std::move(st);
  }
  cancel_.Cancel();  // outside mu_: it runs the workers' cancel callbacks
  // A sleeper that checked cancelled() just before is in wait() once mu_ is free: no lost wakeup.
  { std::lock_guard<std::mutex> lock(mu_); }
  cv_.notify_all();
}

bool FanOut::SleepUntil(Clock::time_point until) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_until(lock, until, [&] { return cancel_.cancelled(); });
  return !cancel_.cancelled();
}

Status FanOut::Run(int n, const std::function<Status(int)>& work,
                   const std::function<void(const LoadEvent&)>& on_event,
                   const std::function<Status()>& poll) {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = n;
  }
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([this, i, &work] {
      Status st = work(i);
      // A worker stopped because another one failed does not hide the real failure.
      if (!st.ok() && !(st.code() == StatusCode::kCancelled && cancel_.cancelled())) {
        Fail(std::move(st));
      }
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
      cv_.notify_all();
    });
  }
  for (;;) {
    std::deque<LoadEvent> events;
    bool finished;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(100),
                   [&] { return running_ == 0 || !events_.empty(); });
      events.swap(events_);
      finished = running_ == 0;
    }
    if (on_event) {
      for (const auto& e : events) on_event(e);
    }
    if (finished) break;
    if (poll && !cancel_.cancelled()) {
      Status st = poll();
      if (!st.ok()) Fail(std::move(st));
    }
  }
  for (auto& t : threads) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

std::chrono::milliseconds BackoffDelay(const ReadOptions& o, int attempt) {
  const auto delay = o.initial_backoff * (1LL << std::clamp(attempt - 1, 0, 16));
  return std::min<std::chrono::milliseconds>(delay, o.max_backoff);
}

}  // namespace embstore::client::internal
