// The one wire codec of embstore.v1.RowChunk (docs/PROTOCOL.md, "Zero-copy chunks"), shared by the
// server (which sends), the client (which receives) and the benchmarks.
//
// A RowChunk on the wire is the protobuf encoding of every field but `payload`, then the tag and
// length of `payload` (field 15, last) and the payload bytes. The sender encodes only the first
// two parts (EncodeRowChunkHeader) and sends the payload straight from where it lies; the
// receiver decodes a message held in pieces (gRPC's receive slices) without copying the payload
// (DecodeRowChunk), which accepts any valid encoding of RowChunk: fields in any order, packed or
// not, unknown fields skipped.
//
// Depends on nothing but the standard library and the field numbers of embstore.proto.
#ifndef EMBSTORE_PROTO_ROW_CHUNK_CODEC_H_
#define EMBSTORE_PROTO_ROW_CHUNK_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "embstore/proto/wire_piece.h"

namespace embstore::wire {

// The fields of one RowChunk, but its payload bytes.
struct RowChunkFields {
  std::uint64_t first_row = 0;
  std::uint64_t row_count = 0;
  std::uint64_t first_block = 0;
  std::vector<std::uint64_t> block_checksums;
  std::optional<std::uint64_t> payload_checksum;
  std::uint64_t content_id = 0;
  std::string table_info;  // an encoded embstore.v1.TableInfo (first chunk only), or empty
  std::uint64_t chunk_rows = 0;
  std::uint64_t payload_size = 0;
};

// Appends the encoding of `f` (every field but the payload bytes, then the payload's tag and
// length, when payload_size > 0) to `out`. The message is `out` followed by the payload.
void EncodeRowChunkHeader(const RowChunkFields& f, std::string* out);

struct DecodedRowChunk {
  RowChunkFields fields;
  std::vector<Piece> payload;  // views into the message's pieces, in order

  // Copies the payload to `dst` (fields.payload_size bytes).
  void CopyPayload(std::byte* dst) const;
};

// Decodes one RowChunk held in `pieces`. False (with `error` naming what was wrong) when the
// bytes are not a valid encoding. The views in `out` point into the pieces, which must outlive
// them.
bool DecodeRowChunk(std::span<const Piece> pieces, DecodedRowChunk* out, std::string* error);

}  // namespace embstore::wire

#endif  // EMBSTORE_PROTO_ROW_CHUNK_CODEC_H_
