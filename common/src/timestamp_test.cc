#include "embstore/common/timestamp.h"

#include <gtest/gtest.h>

namespace embstore {
namespace {

TEST(Timestamp, FormatsUtcSecondsAndMilliseconds) {
  EXPECT_EQ(Rfc3339Utc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(Rfc3339Utc(1796112000), "2026-12-01T08:00:00Z");
  using std::chrono::milliseconds;
  using std::chrono::system_clock;
  EXPECT_EQ(Rfc3339UtcMillis(system_clock::time_point(milliseconds(1796112000123))),
            "2026-12-01T08:00:00.123Z");
  EXPECT_EQ(Rfc3339UtcMillis(system_clock::time_point(milliseconds(-1))),
            "1969-12-31T23:59:59.999Z");
}

}  // namespace
}  // namespace embstore
