// Private: gRPC helpers for the server tests: generic calls to services whose generated code is
// not installed (health, reflection) and for sending malformed bytes.
#ifndef EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_TEST_UTIL_H_
#define EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_TEST_UTIL_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "embstore/v1/embstore.grpc.pb.h"

namespace embstore::server::testing {

inline grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice s(bytes);
  return grpc::ByteBuffer(&s, 1);
}

inline std::string FromBuffer(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!bb.Dump(&slices).ok()) return out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// One unary call with raw request bytes (a ByteBuffer shares its slices: large requests can be
// sent many times from one copy).
inline std::pair<grpc::Status, std::string> GenericUnary(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const grpc::ByteBuffer& request) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::ByteBuffer response;
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return {status, FromBuffer(response)};
}

inline std::pair<grpc::Status, std::string> GenericUnary(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& request) {
  return GenericUnary(channel, method, ToBuffer(request));
}

// Sends one message on a streaming call, half-closes, and collects every response.
inline std::pair<grpc::Status, std::vector<std::string>> GenericStreamOnce(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::string& request) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto call = stub.PrepareCall(&ctx, method, &cq);
  void* tag = nullptr;
  bool ok = false;
  auto step = [&] {
    cq.Next(&tag, &ok);
    return ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  std::vector<std::string> responses;
  grpc::Status status;
  if (step()) {
    grpc::ByteBuffer req = ToBuffer(request);
    call->WriteLast(req, grpc::WriteOptions(), reinterpret_cast<void*>(2));
    step();
    for (;;) {
      grpc::ByteBuffer resp;
      call->Read(&resp, reinterpret_cast<void*>(3));
      if (!step()) break;
      responses.push_back(FromBuffer(resp));
    }
  }
  call->Finish(&status, reinterpret_cast<void*>(4));
  step();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return {status, responses};
}

// grpc.health.v1.Health/Check: 1 SERVING, 2 NOT_SERVING, -1 when the call failed.
inline int HealthStatus(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  std::string req;
  if (!service.empty()) {  // HealthCheckRequest.service = 1 (string)
    req.push_back(0x0a);
    req.push_back(static_cast<char>(service.size()));
    req += service;
  }
  auto [st, resp] = GenericUnary(channel, "/grpc.health.v1.Health/Check", req);
  if (!st.ok()) return -1;
  if (resp.empty()) return 0;  // UNKNOWN
  if (resp.size() == 2 && resp[0] == 0x08) return resp[1];
  return -1;
}

}  // namespace embstore::server::testing

#endif  // EMBSTORE_SERVER_SRC_TRANSPORT_GRPC_TEST_UTIL_H_
