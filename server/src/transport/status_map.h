// The only place where embstore Status codes become gRPC status codes (docs/PROTOCOL.md, "Errors").
#ifndef EMBSTORE_SERVER_SRC_TRANSPORT_STATUS_MAP_H_
#define EMBSTORE_SERVER_SRC_TRANSPORT_STATUS_MAP_H_

#include <grpcpp/support/status.h>

#include "embstore/common/status.h"

namespace embstore::server {

grpc::StatusCode ToGrpcCode(StatusCode code);
grpc::Status ToGrpcStatus(const Status& status);
// "OK", "NOT_FOUND", ... as in the gRPC status code documentation.
const char* GrpcCodeName(grpc::StatusCode code);

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_TRANSPORT_STATUS_MAP_H_
