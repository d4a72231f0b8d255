// The element type on the wire (v1::DType, proto/embstore/v1/embstore.proto) and in a table
// (store::DType), mapped in one place for the server and the client. Header-only: an includer
// links embstore::proto and embstore::store.
#ifndef EMBSTORE_PROTO_DTYPE_H_
#define EMBSTORE_PROTO_DTYPE_H_

#include <optional>

#include "embstore/store/dtype.h"
#include "embstore/v1/embstore.pb.h"

namespace embstore::proto {

inline v1::DType ToProto(store::DType t) {
  switch (t) {
    case store::DType::kF32:
      return v1::DTYPE_F32;
    case store::DType::kF16:
      return v1::DTYPE_F16;
    case store::DType::kBF16:
      return v1::DTYPE_BF16;
  }
  return v1::DTYPE_UNSPECIFIED;
}

// nullopt for DTYPE_UNSPECIFIED and for values this build does not know (a newer peer's).
inline std::optional<store::DType> FromProto(v1::DType d) {
  switch (d) {
    case v1::DTYPE_F32:
      return store::DType::kF32;
    case v1::DTYPE_F16:
      return store::DType::kF16;
    case v1::DTYPE_BF16:
      return store::DType::kBF16;
    default:
      return std::nullopt;
  }
}

}  // namespace embstore::proto

#endif  // EMBSTORE_PROTO_DTYPE_H_
