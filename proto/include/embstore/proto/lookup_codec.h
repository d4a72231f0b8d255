// The wire codec of embstore.v1.LookupResponse's row bytes (docs/PROTOCOL.md, "Lookup"), shared by
// the server (which sends) and the client (which receives).
//
// The server encodes every field but `data` with protobuf, then the tag and length of `data`
// (AppendLookupDataHeader), and hands gRPC the rows' bytes as the buffer it gathered them into.
// The client decodes a reply held in pieces (gRPC's receive slices) without copying `data`
// (DecodeLookupResponse), and accepts any valid encoding of LookupResponse: fields in any order,
// repeated fields packed or not, unknown fields skipped.
//
// Depends on nothing but the standard library and the field numbers of embstore.proto.
#ifndef EMBSTORE_PROTO_LOOKUP_CODEC_H_
#define EMBSTORE_PROTO_LOOKUP_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embstore/proto/wire_piece.h"

namespace embstore::wire {

// Appends the tag and length of LookupResponse.data for `size` bytes to `out`. The encoding of a
// LookupResponse without data, then this, then the bytes, is that LookupResponse with the bytes
// as its data.
void AppendLookupDataHeader(std::uint64_t size, std::string* out);

struct DecodedLookup {
  std::uint64_t content_id = 0;
  std::uint64_t dim = 0;
  std::uint64_t dtype = 0;  // the number of the embstore.v1.DType value
  std::vector<std::uint64_t> rows;
  std::vector<std::uint32_t> missing;
  std::vector<std::uint64_t> row_checksums;
  std::uint64_t data_size = 0;
  std::vector<Piece> data;  // views into the message's pieces, in order
};

// Decodes one LookupResponse held in `pieces`. False (with `error` naming what was wrong) when
// the bytes are not a valid encoding. The views in `out` point into the pieces, which must
// outlive them.
bool DecodeLookupResponse(std::span<const Piece> pieces, DecodedLookup* out, std::string* error);

// Where each of the data_size / row_bytes rows of `d`'s data lies (row_bytes > 0): row k at
// (*at)[k], inside the pieces when one piece holds it whole, else copied into `spill` (resized
// here, and not again, so the places stay valid while it lives). Each copied row holds a boundary
// between pieces, so at most data.size() - 1 rows are copied.
void PlaceRows(const DecodedLookup& d, std::size_t row_bytes, std::vector<const std::uint8_t*>* at,
               std::vector<std::uint8_t>* spill);

}  // namespace embstore::wire

#endif  // EMBSTORE_PROTO_LOOKUP_CODEC_H_
