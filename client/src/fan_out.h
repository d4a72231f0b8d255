// Private: parallel workers for one read, with the first error winning. A streamed read from a
// server (load.cc) runs one worker per stream, the sharded source one per shard; both need the
// same machinery, kept here once:
//   - each worker runs on its own thread and returns a Status;
//   - the first failure is kept and cancels every other worker (through cancel(), which the
//     workers pass on to their gRPC calls); a worker's Cancelled caused by that cancellation does
//     not replace the real failure;
//   - workers Post() events; the calling thread hands them to the caller's on_event, and runs
//     `poll` about every 100 ms (progress callbacks, the caller's cancel token), so user callbacks
//     only ever run on the calling thread;
//   - SleepUntil() is a backoff sleep that a failure or cancellation cuts short.
#ifndef EMBSTORE_CLIENT_SRC_FAN_OUT_H_
#define EMBSTORE_CLIENT_SRC_FAN_OUT_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "embstore/client/client.h"

namespace embstore::client::internal {

class FanOut {
 public:
  using Clock = std::chrono::steady_clock;

  // Cancelled by the first failure; workers hand it to their calls.
  CancelToken& cancel() { return cancel_; }

  // From workers: an event for the caller's on_event, and a failure (the first one wins).
  void Post(LoadEvent e);
  void Fail(Status st);

  // Sleeps until `until` unless cancelled first; false when cancelled.
  bool SleepUntil(Clock::time_point until);

  // Runs work(0) .. work(n - 1) on n threads and returns when all have finished: OK, or the first
  // failure. `poll` (may be empty) returns a Status to stop everything with, e.g. Cancelled when
  // the caller cancels; `on_event` may be empty.
  Status Run(int n, const std::function<Status(int)>& work,
             const std::function<void(const LoadEvent&)>& on_event,
             const std::function<Status()>& poll);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<LoadEvent> events_;
  int running_ = 0;
  Status first_error_;
  CancelToken cancel_;
};

// The wait before retry `attempt` (1-based): initial_backoff doubled per attempt, at most
// max_backoff.
std::chrono::milliseconds BackoffDelay(const ReadOptions& o, int attempt);

}  // namespace embstore::client::internal

#endif  // EMBSTORE_CLIENT_SRC_FAN_OUT_H_
