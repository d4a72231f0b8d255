// A contiguous piece of a received message: gRPC hands a message over as the slices it arrived
// in, and the hand-written codecs (row_chunk_codec.h, lookup_codec.h) read it in place.
#ifndef EMBSTORE_PROTO_WIRE_PIECE_H_
#define EMBSTORE_PROTO_WIRE_PIECE_H_

#include <cstdint>
#include <span>

namespace embstore::wire {

using Piece = std::span<const std::uint8_t>;

}  // namespace embstore::wire

#endif  // EMBSTORE_PROTO_WIRE_PIECE_H_
