#include "zero_copy.h"

#include "row_chunk_codec.h"

namespace embstore::server {

OutgoingRowChunk OutgoingRowChunk::From(RowChunkView chunk) {
  OutgoingRowChunk out;
  out.header.reserve(64 + 8 * chunk.block_checksums.size());
  EncodeRowChunkHeader(chunk, &out.header);
  out.payload = chunk.payload;
  out.keepalive = std::move(chunk.entry);
  return out;
}

}  // namespace embstore::server

namespace grpc {
namespace {

void DropMappingReference(void* user_data) {
  delete static_cast<std::shared_ptr<const embstore::server::TableEntry>*>(user_data);
}

}  // namespace

Status SerializationTraits<embstore::server::OutgoingRowChunk, void>::Serialize(
    const embstore::server::OutgoingRowChunk& msg, ByteBuffer* bb, bool* own_buffer) {
  *own_buffer = true;
  Slice slices[2];
  size_t n = 0;
  slices[n++] = Slice(msg.header);  // small: copied once into a slice of its own
  if (!msg.payload.empty()) {
    auto* ref = new std::shared_ptr<const embstore::server::TableEntry>(msg.keepalive);
    // gRPC never writes through a slice it sends, so dropping const here is safe.
    void* data = const_cast<std::byte*>(msg.payload.data());
    slices[n++] = Slice(data, msg.payload.size(), DropMappingReference, ref);
  }
  ByteBuffer tmp(slices, n);
  bb->Swap(&tmp);
  return Status::OK;
}

Status SerializationTraits<embstore::server::OutgoingRowChunk, void>::Deserialize(
    ByteBuffer*, embstore::server::OutgoingRowChunk*) {
  return Status(StatusCode::UNIMPLEMENTED, "RowChunk is send-only on the server");
}

}  // namespace grpc
