// Private: reads a StreamRows call as raw gRPC byte buffers and decodes each RowChunk without
// protobuf's copy of the payload. The payload stays in gRPC's receive slices until the loader
// copies it once, straight to its final place in the caller's buffer.
//
// The decoder accepts any valid encoding of RowChunk (fields in any order, unknown fields
// skipped), so it only relies on the .proto, not on how the server lays the message out.
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

#include "embstore/v1/embstore.pb.h"

namespace embstore::client::internal {

// The fields of one RowChunk, with the payload as pieces of gRPC slices.
struct RawChunk {
  std::uint64_t first_row = 0;
  std::uint64_t row_count = 0;
  std::uint64_t first_block = 0;
  std::vector<std::uint64_t> block_checksums;
  std::optional<std::uint64_t> payload_checksum;
  std::uint64_t content_id = 0;
  std::uint64_t payload_size = 0;
  std::vector<std::span<const std::uint8_t>> payload;  // views into the slices below

  // Copies the payload to `dst` (payload_size bytes).
  void CopyPayload(std::byte* dst) const;
};

// Decodes one RowChunk from `slices`. False (with `error` set) when the bytes are not a valid
// encoding. The views in `out` point into `slices`, which must outlive them.
bool DecodeRowChunk(const std::vector<grpc::Slice>& slices, RawChunk* out, std::string* error);

// One server-streaming StreamRows call driven synchronously on its own completion queue.
class RowStreamCall {
 public:
  RowStreamCall(grpc::GenericStub* stub, grpc::ClientContext* ctx,
                const v1::StreamRowsRequest& request);
  ~RowStreamCall();  // finishes the call if needed and drains the queue

  // Reads the next chunk into `chunk` (its slices are kept until the next Read). False at the
  // end of the stream or on failure; then Finish() says which. `decode_error` is set when a
  // message arrived but did not decode.
  bool Read(RawChunk* chunk, std::string* decode_error);
  grpc::Status Finish();

 private:
  bool Wait();  // waits for the one outstanding operation; returns its ok

  grpc::CompletionQueue cq_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  bool started_ = false;
  bool finished_ = false;
  grpc::Status status_;
  std::vector<grpc::Slice> slices_;
};

}  // namespace embstore::client::internal

#endif  // EMBSTORE_CLIENT_CHUNK_READER_H_
