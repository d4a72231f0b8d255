#include "log_rate_limiter.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace embstore::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A clock the test moves by hand.
struct FakeClock {
  LogRateLimiter::Clock::time_point t{seconds(1000)};
  std::function<LogRateLimiter::Clock::time_point()> Fn() {
    return [this] { return t; };
  }
};

TEST(LogRateLimiter, WritesTheFirstLineOfAKeyAndCountsRepeatsWithinTheInterval) {
  FakeClock clock;
  LogRateLimiter limiter(seconds(10), 1024, clock.Fn());
  auto first = limiter.Admit("UNAUTHENTICATED ListTables ipv4:10.0.0.1");
  EXPECT_TRUE(first.write);
  EXPECT_EQ(first.suppressed, 0u);
  for (int i = 0; i < 9999; ++i) {
    clock.t += milliseconds(1);  // 10,000 lines in 10 s
    EXPECT_FALSE(limiter.Admit("UNAUTHENTICATED ListTables ipv4:10.0.0.1").write) << i;
  }
  clock.t += milliseconds(1);  // the interval is over: the next line carries the count
  auto next = limiter.Admit("UNAUTHENTICATED ListTables ipv4:10.0.0.1");
  EXPECT_TRUE(next.write);
  EXPECT_EQ(next.suppressed, 9999u);
  // ... and opens a new interval.
  EXPECT_FALSE(limiter.Admit("UNAUTHENTICATED ListTables ipv4:10.0.0.1").write);
}

TEST(LogRateLimiter, KeysAreLimitedSeparately) {
  FakeClock clock;
  LogRateLimiter limiter(seconds(10), 1024, clock.Fn());
  EXPECT_TRUE(limiter.Admit("a").write);
  EXPECT_TRUE(limiter.Admit("b").write);
  EXPECT_FALSE(limiter.Admit("a").write);
  EXPECT_FALSE(limiter.Admit("b").write);
  EXPECT_TRUE(limiter.Admit("c").write);
}

TEST(LogRateLimiter, ReportsTheCountsOfKeysThatWentQuietOnce) {
  FakeClock clock;
  LogRateLimiter limiter(seconds(10), 1024, clock.Fn());
  limiter.Admit("quiet");
  limiter.Admit("quiet");
  limiter.Admit("quiet");
  limiter.Admit("single");  // dropped nothing: never reported
  clock.t += seconds(9);
  EXPECT_TRUE(limiter.TakeSuppressed().empty());  // the interval is not over yet
  clock.t += seconds(1);
  auto taken = limiter.TakeSuppressed();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].key, "quiet");
  EXPECT_EQ(taken[0].count, 2u);
  EXPECT_TRUE(limiter.TakeSuppressed().empty());
  // Forgotten: the next line of the key is written, with no count to carry.
  auto again = limiter.Admit("quiet");
  EXPECT_TRUE(again.write);
  EXPECT_EQ(again.suppressed, 0u);
}

TEST(LogRateLimiter, TakeSuppressedAllReportsKeysStillInTheirInterval) {
  FakeClock clock;
  LogRateLimiter limiter(seconds(10), 1024, clock.Fn());
  limiter.Admit("k");
  limiter.Admit("k");
  auto taken = limiter.TakeSuppressed(/*all=*/true);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].count, 1u);
}

TEST(LogRateLimiter, ZeroIntervalWritesEveryLine) {
  FakeClock clock;
  LogRateLimiter limiter(milliseconds(0), 1024, clock.Fn());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Admit("k").write);
  EXPECT_TRUE(limiter.TakeSuppressed(true).empty());
}

TEST(LogRateLimiter, ManyKeysShareTheOverflowKeyOnceTheTableIsFull) {
  // Keys are chosen by clients (their addresses): their number must not grow memory.
  FakeClock clock;
  LogRateLimiter limiter(seconds(10), 2, clock.Fn());
  EXPECT_TRUE(limiter.Admit("a").write);
  EXPECT_TRUE(limiter.Admit("b").write);
  EXPECT_TRUE(limiter.Admit("c").write);   // first line of the overflow key
  EXPECT_FALSE(limiter.Admit("d").write);  // shares it
  EXPECT_FALSE(limiter.Admit("e").write);
  clock.t += seconds(10);
  // Intervals over and nothing dropped for a and b: they make room for new keys.
  EXPECT_TRUE(limiter.Admit("f").write);
  auto taken = limiter.TakeSuppressed(true);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].key, LogRateLimiter::kOverflowKey);
  EXPECT_EQ(taken[0].count, 2u);
}

}  // namespace
}  // namespace embstore::server
