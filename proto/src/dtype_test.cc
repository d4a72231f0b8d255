#include "embstore/proto/dtype.h"

#include <gtest/gtest.h>

namespace embstore::proto {
namespace {

TEST(DTypeMapping, EveryTableTypeRoundTripsThroughTheWire) {
  for (store::DType t : {store::DType::kF32, store::DType::kF16, store::DType::kBF16}) {
    const v1::DType wire = ToProto(t);
    EXPECT_NE(wire, v1::DTYPE_UNSPECIFIED) << store::DTypeName(t);
    EXPECT_EQ(FromProto(wire), t) << store::DTypeName(t);
  }
  EXPECT_EQ(ToProto(store::DType::kF32), v1::DTYPE_F32);
  EXPECT_EQ(ToProto(store::DType::kF16), v1::DTYPE_F16);
  EXPECT_EQ(ToProto(store::DType::kBF16), v1::DTYPE_BF16);
}

TEST(DTypeMapping, UnspecifiedAndUnknownWireValuesAreRefused) {
  EXPECT_FALSE(FromProto(v1::DTYPE_UNSPECIFIED).has_value());
  EXPECT_FALSE(FromProto(static_cast<v1::DType>(99)).has_value());  // a newer peer's type
}

}  // namespace
}  // namespace embstore::proto
