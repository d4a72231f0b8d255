// A table's description on the wire (v1::TableInfo) and in memory (store::TableDesc), mapped in
// one place: the server writes what it describes with ToTableInfo, the client reads it back with
// FromTableInfo. Header-only: an includer links embstore::proto and embstore::store.
#ifndef EMBSTORE_PROTO_TABLE_INFO_H_
#define EMBSTORE_PROTO_TABLE_INFO_H_

#include <string>

#include "embstore/common/status.h"
#include "embstore/proto/dtype.h"
#include "embstore/store/format.h"
#include "embstore/store/table_desc.h"
#include "embstore/v1/embstore.pb.h"

namespace embstore::proto {

// `d` as the server sends it; user metadata only `with_metadata` (DescribeTable, not ListTables).
inline void ToTableInfo(const store::TableDesc& d, bool with_metadata, v1::TableInfo* info) {
  info->set_name(d.name);
  info->set_rows(d.rows);
  info->set_dim(d.dim);
  info->set_dtype(ToProto(d.dtype));
  info->set_row_bytes(d.row_bytes);
  info->set_content_id(d.content_id);
  info->set_generation(d.generation);
  info->set_block_rows(d.block_rows);
  info->set_num_blocks(d.num_blocks);
  info->set_checksum_algorithm(std::string(store::kChecksumName));
  info->set_has_keys(d.has_keys);
  info->set_key_count(d.has_keys ? d.rows : 0);
  info->set_key_bytes(d.has_keys ? d.key_bytes : 0);
  info->set_format_version(d.format_version);
  info->set_data_offset(d.data_offset);
  if (with_metadata) {
    for (const auto& [k, v] : d.metadata) (*info->mutable_metadata())[k] = v;
  }
  if (d.file) {
    v1::FileIdentity* f = info->mutable_file();
    f->set_path(d.file->path);
    f->set_device(d.file->identity.device);
    f->set_inode(d.file->identity.inode);
    f->set_size(d.file->identity.size);
    f->set_mtime_ns(d.file->identity.mtime_ns);
  }
}

// The description a peer sent, checked as a file's header is: it is input from the network, so
// its sizes go through the same overflow-checked arithmetic (store::ComputeGeometry) before
// anything is sized from them. `origin` names the peer in errors ("server 'host:port'").
inline Result<store::TableDesc> FromTableInfo(const v1::TableInfo& t, const std::string& origin) {
  auto dtype = FromProto(t.dtype());
  if (!dtype) {
    return Status::Unimplemented(origin + ": table '" + t.name() +
                                 "' has a dtype this build does not know (" +
                                 std::to_string(t.dtype()) + ")");
  }
  store::TableDesc d;
  d.name = t.name();
  d.rows = t.rows();
  d.dim = t.dim();
  d.dtype = *dtype;
  d.row_bytes = t.row_bytes();
  d.content_id = t.content_id();
  d.generation = t.generation();
  d.block_rows = t.block_rows();
  d.num_blocks = t.num_blocks();
  d.has_keys = t.has_keys();
  d.key_bytes = t.key_bytes();
  d.format_version = t.format_version();
  d.data_offset = t.data_offset();
  for (const auto& [k, v] : t.metadata()) d.metadata[k] = v;
  if (t.has_file() && !t.file().path().empty()) {
    d.file = store::ServerFile{t.file().path(), FileIdentity{t.file().device(), t.file().inode(),
                                                             t.file().size(), t.file().mtime_ns()}};
  }
  auto g = store::ComputeGeometry(d.rows, d.dim, store::DTypeSize(d.dtype), d.block_rows,
                                  origin + " described table '" + d.name + "'");
  if (!g.ok()) return Status::Corruption(g.status().message());
  if (d.row_bytes != g->row_bytes || d.num_blocks != g->num_blocks) {
    return Status::Internal(origin + " described table '" + d.name +
                            "' inconsistently (row_bytes " + std::to_string(d.row_bytes) +
                            ", dim " + std::to_string(d.dim) + ", block_rows " +
                            std::to_string(d.block_rows) + ")");
  }
  return d;
}

}  // namespace embstore::proto

#endif  // EMBSTORE_PROTO_TABLE_INFO_H_
