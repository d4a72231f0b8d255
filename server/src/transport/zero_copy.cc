#include "zero_copy.h"

#include "embstore/proto/lookup_codec.h"
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

void DropReplyBuffer(void* user_data) {
  delete static_cast<std::shared_ptr<const std::byte[]>*>(user_data);
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

Status SerializationTraits<embstore::server::LookupReply, void>::Serialize(
    const embstore::server::LookupReply& msg, ByteBuffer* bb, bool* own_buffer) {
  *own_buffer = true;
  std::string header;
  if (!msg.fields.AppendToString(&header)) {
    return Status(StatusCode::INTERNAL, "cannot encode a LookupResponse");
  }
  if (msg.data_size > 0) embstore::wire::AppendLookupDataHeader(msg.data_size, &header);
  Slice slices[2];
  size_t n = 0;
  slices[n++] = Slice(header);  // small: copied once into a slice of its own
  if (msg.data_size > 0) {
    // gRPC never writes through a slice it sends, so dropping const here is safe.
    slices[n++] = Slice(const_cast<std::byte*>(msg.data.get()), msg.data_size, DropReplyBuffer,
                        new std::shared_ptr<const std::byte[]>(msg.data));
  }
  ByteBuffer tmp(slices, n);
  bb->Swap(&tmp);
  return Status::OK;
}

Status SerializationTraits<embstore::server::LookupReply, void>::Deserialize(
    ByteBuffer*, embstore::server::LookupReply*) {
  return Status(StatusCode::UNIMPLEMENTED, "LookupResponse is send-only on the server");
}

}  // namespace grpc
