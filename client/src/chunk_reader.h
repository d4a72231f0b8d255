// Private: reads a StreamRows call as raw gRPC byte buffers and decodes each RowChunk with the
// shared wire codec (embstore/proto/row_chunk_codec.h), without protobuf's copy of the payload.
// The payload stays in gRPC's receive slices until the loader copies it once, straight to its
// final place in the caller's buffer.
#ifndef EMBSTORE_CLIENT_CHUNK_READER_H_
#define EMBSTORE_CLIENT_CHUNK_READER_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "embstore/proto/row_chunk_codec.h"
#include "embstore/v1/embstore.pb.h"

namespace embstore::client::internal {

// One server-streaming StreamRows call driven synchronously on its own completion queue.
class RowStreamCall {
 public:
  RowStreamCall(grpc::GenericStub* stub, grpc::ClientContext* ctx,
                const v1::StreamRowsRequest& request);
  ~RowStreamCall();  // finishes the call if needed and drains the queue

  // Reads the next chunk into `chunk` (its slices are kept until the next Read). False at the
  // end of the stream or on failure; then Finish() says which. `decode_error` is set when a
  // message arrived but did not decode.
  bool Read(wire::DecodedRowChunk* chunk, std::string* decode_error);
  grpc::Status Finish();

 private:
  bool Wait();  // waits for the one outstanding operation; returns its ok

  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
  bool finished_ = false;
  grpc::Status status_;
  std::vector<grpc::Slice> slices_;
  std::vector<wire::Piece> pieces_;  // views of slices_
};

}  // namespace embstore::client::internal

#endif  // EMBSTORE_CLIENT_CHUNK_READER_H_
