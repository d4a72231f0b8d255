#include "row_chunk_codec.h"

#include "embstore/proto/row_chunk_codec.h"

namespace embstore::server {

void EncodeRowChunkHeader(const RowChunkView& c, std::string* out) {
  wire::RowChunkFields f;
  f.first_row = c.first_row;
  f.row_count = c.row_count;
  f.first_block = c.first_block;
  f.block_checksums.assign(c.block_checksums.begin(), c.block_checksums.end());
  f.payload_checksum = c.payload_checksum;
  f.content_id = c.content_id;
  if (c.first && c.entry) {
    v1::TableInfo info;
    Service::FillTableInfo(*c.entry, false, &info);
    f.table_info = info.SerializeAsString();
  }
  f.chunk_rows = c.chunk_rows;
  f.payload_size = c.payload.size();
  wire::EncodeRowChunkHeader(f, out);
}

}  // namespace embstore::server
