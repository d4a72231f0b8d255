// Private: what the RowSource implementations (file_source.cc, server_source.cc,
// sharded_source.cc) share.
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

// The description of a local table, as a server would give it (no file identity).
TableDesc DescribeFile(const store::Table& table, const std::string& name);

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

// Places looked-up rows (`data`, one after another in `dtype`, for the request positions that are
// not in `missing`) at their request positions in `out`, converting to f32 when asked.
void ScatterLookup(std::span<const std::byte> data, const std::vector<std::uint32_t>& missing,
                   std::size_t requested, store::DType dtype, std::uint64_t dim, bool to_f32,
                   std::span<std::byte> out);

// Streams rows [options.begin_row, end_row) of the table `desc` describes from `client` into
// `sink` (raw rows, never the local path; the caller has checked the range): each chunk is
// verified and handed over from gRPC's receive buffers, not copied in between.
Result<LoadStats> StreamRowsInto(Client& client, const TableDesc& desc, RowSink& sink,
                                 const LoadOptions& options);

}  // namespace embstore::client::internal

#endif  // EMBSTORE_CLIENT_SRC_SOURCES_H_
