// OutgoingRowChunk and its grpc::SerializationTraits: how a RowChunk leaves the server without
// its payload being copied (docs/PROTOCOL.md, "Zero-copy chunks"). Also how a lookup's reply
// leaves without its rows' bytes being copied again (LookupReply, service.h).
//
// Serialize() builds a grpc::ByteBuffer of two slices: a small one holding the hand-encoded
// header (row_chunk_codec.h) and one constructed over the payload bytes inside the table's
// mapping. The second slice owns a heap-allocated shared_ptr to the TableEntry; gRPC calls the
// slice's destroy callback when it no longer needs the bytes (after they were written to the
// socket, or when the call died), which drops that reference and, if it was the last one, unmaps
// the file. So a replaced or removed table stays mapped exactly as long as bytes of it are queued.
#ifndef EMBSTORE_SERVER_SRC_TRANSPORT_ZERO_COPY_H_
#define EMBSTORE_SERVER_SRC_TRANSPORT_ZERO_COPY_H_

#include <grpcpp/impl/serialization_traits.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

#include <memory>
#include <span>
#include <string>

#include "../service.h"

namespace embstore::server {

struct OutgoingRowChunk {
  std::string header;                  // fields 1-8 plus the payload's tag and length
  std::span<const std::byte> payload;  // inside keepalive's mapping
  std::shared_ptr<const TableEntry> keepalive;

  // Encodes the header of `chunk` and takes over its payload view and mapping reference.
  static OutgoingRowChunk From(RowChunkView chunk);
};

}  // namespace embstore::server

namespace grpc {

template <>
class SerializationTraits<embstore::server::OutgoingRowChunk, void> {
 public:
  static Status Serialize(const embstore::server::OutgoingRowChunk& msg, ByteBuffer* bb,
                          bool* own_buffer);
  // The server never receives a RowChunk.
  static Status Deserialize(ByteBuffer* bb, embstore::server::OutgoingRowChunk* msg);
};

// A LookupReply goes out as two slices: protobuf's encoding of its fields with the tag and length
// of `data` after them (embstore/proto/lookup_codec.h), then a slice over the gathered rows that
// owns a reference to their buffer.
template <>
class SerializationTraits<embstore::server::LookupReply, void> {
 public:
  static Status Serialize(const embstore::server::LookupReply& msg, ByteBuffer* bb,
                          bool* own_buffer);
  // The server never receives a LookupResponse.
  static Status Deserialize(ByteBuffer* bb, embstore::server::LookupReply* msg);
};

}  // namespace grpc

#endif  // EMBSTORE_SERVER_SRC_TRANSPORT_ZERO_COPY_H_
