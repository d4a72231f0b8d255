#include "chunk_reader.h"

#include <cstring>

namespace embstore::client::internal {
RowStreamCall::RowStreamCall(grpc::GenericStub* stub, grpc::ClientContext* ctx,
                             const v1::StreamRowsRequest& request) {
  call_ = stub->PrepareCall(ctx, "/embstore.v1.EmbStore/StreamRows", &cq_);
  call_->StartCall(this);
  started_ = Wait();
  if (!started_) return;
  std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buf(&slice, 1);
  call_->WriteLast(buf, grpc::WriteOptions(), this);
  started_ = Wait();
}

RowStreamCall::~RowStreamCall() {
  Finish();
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool RowStreamCall::Wait() {
  void* tag;
  bool ok = false;
  if (!cq_.Next(&tag, &ok)) return false;
  return ok;
}

bool RowStreamCall::Read(wire::DecodedRowChunk* chunk, std::string* decode_error) {
  if (!started_ || finished_) return false;
  grpc::ByteBuffer bb;
  call_->Read(&bb, this);
  if (!Wait()) return false;
  slices_.clear();
  if (!bb.Dump(&slices_).ok()) {
    *decode_error = "cannot read the received message";
    return false;
  }
  pieces_.clear();
  for (const auto& slice : slices_) pieces_.emplace_back(slice.begin(), slice.size());
  return wire::DecodeRowChunk(pieces_, chunk, decode_error);
}

grpc::Status RowStreamCall::Finish() {
  if (!finished_) {
    finished_ = true;
    call_->Finish(&status_, this);
    Wait();
  }
  return status_;
}

}  // namespace embstore::client::internal
