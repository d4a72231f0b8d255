#include "embstore/common/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace embstore {
namespace {

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  EMBSTORE_ASSIGN_OR_RETURN(int h, Half(x));
  EMBSTORE_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  EMBSTORE_RETURN_NOT_OK(Half(x).status());
  return Status::OK();
}

TEST(Status, OkIsDefault) {
  Status st;
  EXPECT_TRUE(st.ok());
  EXPECT_EQ(st.ToString(), "ok");
}

TEST(Status, CarriesCodeAndMessage) {
  Status st = Status::Corruption("bad magic");
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_EQ(st.ToString(), "corruption: bad magic");
  EXPECT_EQ(st.WithContext("file 'a'").message(), "file 'a': bad magic");
}

TEST(Status, FromErrnoMapsCommonErrors) {
  EXPECT_EQ(Status::FromErrno("open 'x'", ENOENT).code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::FromErrno("open 'x'", EEXIST).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Status::FromErrno("open 'x'", EACCES).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Status::FromErrno("open 'x'", EIO).code(), StatusCode::kIOError);
  EXPECT_NE(Status::FromErrno("open 'x'", ENOENT).message().find("open 'x': "), std::string::npos);
}

TEST(Result, PropagatesErrorsThroughMacros) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace embstore
