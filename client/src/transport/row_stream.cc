#include "row_stream.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <vector>

#include "embstore/v1/embstore.pb.h"
#include "grpc_util.h"

namespace embstore::client::transport {

// The gRPC state of one call, driven synchronously on its own completion queue.
struct RowStream::Call {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> rpc;
  std::string target;  // for messages
  CancelToken* cancel = nullptr;
  bool registered = false;
  bool started = false;
  bool finished = false;
  grpc::Status status;
  std::vector<grpc::Slice> slices;
  std::vector<wire::Piece> pieces;  // views of slices

  bool Wait() {  // waits for the one outstanding operation; returns its ok
    void* tag;
    bool ok = false;
    if (!cq.Next(&tag, &ok)) return false;
    return ok;
  }
};

RowStream::RowStream(Client& client, int index, bool fresh,
                     std::optional<std::chrono::steady_clock::time_point> deadline,
                     const RowRequest& request, CancelToken* cancel)
    : call_(new Call) {
  Call& c = *call_;
  c.target = client.options_.target;
  c.channel = client.impl_->StreamChannel(client.options_.target, index, fresh);
  c.stub = std::make_unique<grpc::GenericStub>(c.channel);
  internal::PrepareContext(&c.ctx, client.options_, deadline, /*unary=*/false);
  c.cancel = cancel;
  if (cancel) {
    std::lock_guard<std::mutex> lock(cancel->mu_);
    if (cancel->cancelled()) return;  // never started; Finish() says CANCELLED
    cancel->contexts_.insert(&c.ctx);
    c.registered = true;
  }
  v1::StreamRowsRequest req;
  req.set_table(request.table);
  req.set_begin_row(request.begin_row);
  req.set_end_row(request.end_row);
  req.set_chunk_bytes(request.chunk_bytes);
  req.set_expected_content_id(request.expected_content_id);
  c.rpc = c.stub->PrepareCall(&c.ctx, "/embstore.v1.EmbStore/StreamRows", &c.cq);
  c.rpc->StartCall(&c);
  c.started = c.Wait();
  if (!c.started) return;
  std::string bytes = req.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buf(&slice, 1);
  c.rpc->WriteLast(buf, grpc::WriteOptions(), &c);
  c.started = c.Wait();
}

RowStream::~RowStream() {
  Call& c = *call_;
  if (c.rpc) {
    Finish();
    c.cq.Shutdown();
    void* tag;
    bool ok;
    while (c.cq.Next(&tag, &ok)) {
    }
  }
  if (c.registered) {
    std::lock_guard<std::mutex> lock(c.cancel->mu_);
    c.cancel->contexts_.erase(&c.ctx);
  }
}

bool RowStream::Read(wire::DecodedRowChunk* chunk, std::string* decode_error) {
  Call& c = *call_;
  if (!c.rpc || !c.started || c.finished) return false;
  grpc::ByteBuffer bb;
  c.rpc->Read(&bb, &c);
  if (!c.Wait()) return false;
  c.slices.clear();
  if (!bb.Dump(&c.slices).ok()) {
    *decode_error = "cannot read the received message";
    return false;
  }
  c.pieces.clear();
  for (const auto& slice : c.slices) c.pieces.emplace_back(slice.begin(), slice.size());
  return wire::DecodeRowChunk(c.pieces, chunk, decode_error);
}

void RowStream::Cancel() { call_->ctx.TryCancel(); }

StreamEnd RowStream::Finish() {
  Call& c = *call_;
  if (!c.rpc) {
    return {StreamEnd::Kind::kServerCancelled, Status::Cancelled("load cancelled"), ""};
  }
  if (!c.finished) {
    c.finished = true;
    c.rpc->Finish(&c.status, &c);
    c.Wait();
  }
  const grpc::Status& s = c.status;
  StreamEnd end;
  end.message = s.error_message();
  if (s.ok()) return end;
  end.status = internal::FromGrpc(s, c.target);
  switch (s.error_code()) {
    case grpc::StatusCode::CANCELLED:
      end.kind = StreamEnd::Kind::kServerCancelled;
      break;
    case grpc::StatusCode::FAILED_PRECONDITION:
      end.kind = StreamEnd::Kind::kFailedPrecondition;
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      end.kind = StreamEnd::Kind::kDeadlineExceeded;
      break;
    default:
      end.kind = internal::Transient(s.error_code()) ? StreamEnd::Kind::kTransient
                                                      : StreamEnd::Kind::kFinal;
  }
  return end;
}

}  // namespace embstore::client::transport
