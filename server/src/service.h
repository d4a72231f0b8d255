// Private: Service, the protocol's logic (docs/PROTOCOL.md), free of any transport.
//
// Each RPC of embstore.v1.EmbStore is one method here that takes the request message and returns
// either the reply or a Status whose code the transport maps to a gRPC status code (PROTOCOL.md,
// "Errors"). Streaming RPCs return a cursor (RowStream, KeyStream) that the transport pulls one
// chunk at a time, so a slow or vanished client holds no more than the chunk being sent.
//
// Row chunks are views: RowChunkView::payload points into the table's mapping, and
// RowChunkView::entry keeps that mapping alive for as long as the view (or a copy of its
// shared_ptr) lives. The transport hands both to gRPC without copying the payload.
//
// Thread safety: Service methods are safe to call concurrently. A RowStream / KeyStream is used
// by one thread at a time.
#ifndef EMBSTORE_SERVER_SRC_SERVICE_H_
#define EMBSTORE_SERVER_SRC_SERVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "catalog.h"
#include "embstore/common/status.h"
#include "embstore/server/config.h"
#include "embstore/v1/embstore.pb.h"

namespace embstore::server {

// One chunk of a row stream; see RowChunk in embstore.proto.
struct RowChunkView {
  std::shared_ptr<const TableEntry> entry;  // keeps `payload` mapped
  std::uint64_t first_row = 0;
  std::uint64_t row_count = 0;
  std::uint64_t first_block = 0;
  std::vector<std::uint64_t> block_checksums;
  std::optional<std::uint64_t> payload_checksum;
  std::uint64_t content_id = 0;
  bool first = false;            // first chunk of its stream: carries table info and chunk_rows
  std::uint64_t chunk_rows = 0;  // set in the first chunk only
  std::span<const std::byte> payload;
};

class RowStream {
 public:
  // The next chunk, nullopt after the last one. A Corruption status (DATA_LOSS on the wire) when
  // the file was truncated or could not be read under the mapping.
  Result<std::optional<RowChunkView>> Next();

  const TableEntry& entry() const { return *entry_; }
  std::uint64_t begin_row() const { return begin_; }
  std::uint64_t end_row() const { return end_; }
  std::uint64_t chunk_rows() const { return chunk_rows_; }

 private:
  friend class Service;
  std::shared_ptr<const TableEntry> entry_;
  std::uint64_t begin_ = 0, end_ = 0, next_ = 0;
  std::uint64_t chunk_rows_ = 0;
  bool aligned_ = true;  // chunks are whole blocks (else: pieces of one block)
  bool sent_first_ = false;
  std::uint64_t readahead_bytes_ = 0;
  std::uint64_t advised_until_ = 0;  // row up to which WILLNEED was issued
};

class KeyStream {
 public:
  Result<std::optional<v1::KeyChunk>> Next();

 private:
  friend class Service;
  std::shared_ptr<const TableEntry> entry_;
  std::uint64_t next_ = 0, end_ = 0;
  std::uint64_t chunk_bytes_ = 0;
  bool sent_any_ = false;
};

// A lookup's reply: every field of LookupResponse but `data`, and the rows' bytes in a buffer of
// their own, which the transport hands to gRPC as it is (zero_copy.h) instead of copying it into
// the message and the message into gRPC's buffers.
struct LookupReply {
  v1::LookupResponse fields;  // `data` left empty
  std::shared_ptr<const std::byte[]> data;
  std::size_t data_size = 0;

  std::span<const std::byte> bytes() const { return {data.get(), data_size}; }
};

class Service {
 public:
  Service(std::shared_ptr<Catalog> catalog, ServiceOptions options);

  Result<v1::ListTablesResponse> ListTables(const v1::ListTablesRequest& request) const;
  Result<v1::TableInfo> DescribeTable(const v1::DescribeTableRequest& request) const;
  Result<std::unique_ptr<RowStream>> StreamRows(const v1::StreamRowsRequest& request) const;
  Result<LookupReply> Lookup(const v1::LookupRequest& request) const;
  Result<v1::RowHashesResponse> RowHashes(const v1::RowHashesRequest& request) const;
  Result<std::unique_ptr<KeyStream>> StreamKeys(const v1::StreamKeysRequest& request) const;

  // TableInfo of an entry; user metadata only when `with_metadata`.
  static void FillTableInfo(const TableEntry& entry, bool with_metadata, v1::TableInfo* info);

  const ServiceOptions& options() const { return options_; }
  Catalog& catalog() const { return *catalog_; }

 private:
  Result<std::shared_ptr<const TableEntry>> Resolve(
      const std::string& table, const std::optional<std::uint64_t>& expected) const;

  std::shared_ptr<Catalog> catalog_;
  ServiceOptions options_;
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_SERVICE_H_
