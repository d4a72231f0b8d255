// Private: what the RowSource implementations (file_source.cc, server_source.cc,
// sharded_source.cc, object_source.cc) share.
#ifndef EMBSTORE_CLIENT_SRC_SOURCES_H_
#define EMBSTORE_CLIENT_SRC_SOURCES_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embstore/client/client.h"
#include "embstore/client/row_source.h"
#include "embstore/store/table.h"

namespace embstore::client::internal {

// What every CopyKeys checks first: that table `name` has keys, and that `out_bytes` holds
// `keys` rows of `per_row` bytes.
Status CheckKeyLookup(const std::string& name, bool has_keys, std::uint64_t per_row,
                      std::size_t keys, std::size_t out_bytes);

// CopyKeys and Keys over a local table: keys verified before the first lookup and each row's
// block before its row is copied (when options.verify), the mapping checked afterwards.
Result<KeyCopyResult> CopyKeysFromTable(const store::Table& table, const std::string& name,
                                        std::span<const std::string> keys,
                                        std::span<std::byte> out, const ReadOptions& options);
Result<std::vector<std::string>> KeysFromTable(const store::Table& table, const std::string& name,
                                               std::uint64_t begin, std::uint64_t end);

// The row hashes (stored, or computed from verified rows) and block checksums of a local table.
Result<RowDigest> DigestOfTable(const store::Table& table);

// Rows `ids` of a local table into `out` (RowSource::CopyRowIds), each row's block verified once
// for the life of the mapping (store::Table::GatherRows).
Result<LoadStats> CopyRowIdsFromTable(const store::Table& table, const TableDesc& desc,
                                      std::span<const std::uint64_t> ids,
                                      std::span<std::byte> out);

// Places looked-up rows (`data`, one after another in `dtype`, for the request positions that are
// not in `missing`) at their request positions in `out`, converting to f32 when asked.
void ScatterLookup(std::span<const std::byte> data, const std::vector<std::uint32_t>& missing,
                   std::size_t requested, store::DType dtype, std::uint64_t dim, bool to_f32,
                   std::span<std::byte> out);

// Bytes rows [begin, end) of `desc`'s table take (x dim x 4 with to_f32); InvalidArgument when
// begin > end, OutOfRange when end > rows. RowSource::OutputBytes for every source.
Result<std::uint64_t> RowRangeBytes(const TableDesc& desc, std::uint64_t begin, std::uint64_t end,
                                    bool to_f32);

// Streams rows [begin, end) of the version of the table `desc` describes from `client` into `out`
// (RowRangeBytes bytes): parallel streams, each chunk verified before it counts, resumed after
// transient failures from the last verified row (docs/PROTOCOL.md). Never the local path: the
// server source decides that once, when it is opened.
Result<LoadStats> StreamRows(Client& client, const TableDesc& desc, std::uint64_t begin,
                             std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options);

// The same into `sink` (raw rows; options.to_f32 is ignored): each chunk is verified and handed
// over from gRPC's receive buffers, not copied in between.
Result<LoadStats> StreamRowsInto(Client& client, const TableDesc& desc, std::uint64_t begin,
                                 std::uint64_t end, RowSink& sink, const ReadOptions& options);

}  // namespace embstore::client::internal

#endif  // EMBSTORE_CLIENT_SRC_SOURCES_H_
