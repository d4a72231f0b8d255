// The server's side of the RowChunk wire codec (proto/include/embstore/proto/row_chunk_codec.h):
// a chunk view of the service turned into the header that precedes its payload, which goes out
// straight from the mapping. The concatenation is an ordinary RowChunk message that any protobuf
// parser reads.
#ifndef EMBSTORE_SERVER_SRC_TRANSPORT_ROW_CHUNK_CODEC_H_
#define EMBSTORE_SERVER_SRC_TRANSPORT_ROW_CHUNK_CODEC_H_

#include <string>

#include "../service.h"

namespace embstore::server {

// Appends the encoding of `chunk`'s fields 1-8 (table info from chunk.entry when chunk.first)
// and the tag and length of field 15 to `out`. The message is `out` followed by chunk.payload.
void EncodeRowChunkHeader(const RowChunkView& chunk, std::string* out);

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_TRANSPORT_ROW_CHUNK_CODEC_H_
