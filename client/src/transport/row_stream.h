// Private: one StreamRows call, as the loader sees it: no gRPC types (client/src/transport/ is the
// only place that includes gRPC, as server/src/transport/ is for the server).
//
// Messages are read as raw gRPC byte buffers and decoded with the shared wire codec
// (embstore/proto/row_chunk_codec.h), without protobuf's copy of the payload: the payload stays in
// gRPC's receive slices until the loader copies it once, straight to its final place.
#ifndef EMBSTORE_CLIENT_SRC_TRANSPORT_ROW_STREAM_H_
#define EMBSTORE_CLIENT_SRC_TRANSPORT_ROW_STREAM_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "embstore/client/client.h"
#include "embstore/common/status.h"
#include "embstore/proto/row_chunk_codec.h"

namespace embstore::client::transport {

// What a StreamRows call asks for.
struct RowRequest {
  std::string table;
  std::uint64_t begin_row = 0;
  std::uint64_t end_row = 0;
  std::uint64_t chunk_bytes = 0;  // 0: the server's default
  std::uint64_t expected_content_id = 0;
};

// How a call ended, in the terms the loader's retry policy uses.
struct StreamEnd {
  enum class Kind {
    kOk,                  // the server finished the stream
    kServerCancelled,     // CANCELLED that the client did not ask for: a server shutting down
    kFailedPrecondition,  // the table changed (content id) or cannot be streamed
    kDeadlineExceeded,
    kTransient,           // the server or connection went away, or shed load: worth a retry
    kFinal,               // anything else: retrying would not help
  };
  Kind kind = Kind::kOk;
  Status status;        // the error as an embstore Status naming the server (kFinal, kTransient)
  std::string message;  // the server's own message
};

class RowStream {
 public:
  // Starts the call on parallel stream `index`'s connection of `client` (a fresh connection when
  // `fresh`), with the client's token and `deadline`. The call is registered with `cancel`:
  // CancelToken::Cancel() from any thread cancels it.
  RowStream(Client& client, int index, bool fresh,
            std::optional<std::chrono::steady_clock::time_point> deadline,
            const RowRequest& request, CancelToken* cancel);
  ~RowStream();  // finishes the call if needed and unregisters it
  RowStream(const RowStream&) = delete;
  RowStream& operator=(const RowStream&) = delete;

  // The next chunk (its payload views stay valid until the next Read). False at the end of the
  // stream or on failure; then Finish() says which. `decode_error` is set when a message arrived
  // but did not decode.
  bool Read(wire::DecodedRowChunk* chunk, std::string* decode_error);
  // Cancels the call (after a chunk the loader refused).
  void Cancel();
  StreamEnd Finish();

 private:
  struct Call;
  std::unique_ptr<Call> call_;
};

}  // namespace embstore::client::transport

#endif  // EMBSTORE_CLIENT_SRC_TRANSPORT_ROW_STREAM_H_
