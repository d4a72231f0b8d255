// Client: one connection to an embstore server (docs/PROTOCOL.md) and its unary calls: the
// tables it serves, a table's description, key and row lookups, keys, and the zero-copy mapping
// of the server's file when it is this host's.
//
// Rows are not read through a Client: open the table as a RowSource (OpenSource or
// OpenServerSource, row_source.h), which describes it once and pins that version for every read.
// The server source streams rows over the Client's connection settings with several parallel
// streams over separate connections; every chunk is verified against the table's block checksums
// before it counts; on transient failures (server restart, connection reset, UNAVAILABLE) it
// backs off and resumes each stream from its last verified row, so verified bytes are never
// downloaded twice and unverified bytes never reach the caller's buffer as final data. When the
// server says the table's file is on this host and the very same file can be opened (same
// device, inode, size, mtime and content id), it reads the file instead (row_source.h says how).
//
// A Client holds the connection settings for one target ("host:port", "unix:/path" or any gRPC
// target URI), with optional TLS and a bearer token.
//
// Thread safety: a Client may be used from several threads at once.
#ifndef EMBSTORE_CLIENT_CLIENT_H_
#define EMBSTORE_CLIENT_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/client/types.h"
#include "embstore/common/status.h"
#include "embstore/store/table.h"

namespace embstore::client {

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(const ConnectOptions& options);
  ~Client();

  const std::string& target() const { return options_.target; }

  Result<std::vector<TableDesc>> ListTables();
  // With a `deadline`, it bounds the call (connecting included) instead of rpc_timeout, when it
  // comes first.
  Result<TableDesc> Describe(
      const std::string& table,
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  // The server's file for `table`, mapped read-only, when this host can open it (same device,
  // inode, size, mtime and content id); NotFound otherwise. The zero-copy path.
  Result<std::shared_ptr<const store::Table>> OpenLocal(const TableDesc& desc);

  // Rows by id, each checked against the checksum the server sends with it; with
  // `expected_content_id`, only that version (FailedPrecondition otherwise).
  Result<LookupResult> LookupRows(const std::string& table, std::span<const std::uint64_t> rows,
                                  std::optional<std::uint64_t> expected_content_id = std::nullopt);
  Result<LookupResult> LookupKeys(const std::string& table, std::span<const std::string> keys);
  // Rows `ids` of version `content_id` of a table whose rows are `row_bytes` bytes, each checked
  // against its checksum, into `out` (ids.size() * row_bytes bytes, in the order of `ids`): Lookup
  // RPCs of at most 1 MiB of rows each, up to four at a time, so the round trips and both sides'
  // copying overlap (a delta sync's changed rows: 9,382 rows of 512 bytes, 27 ms in three RPCs
  // one after another). An id past the table's end is OutOfRange. *wire_bytes grows by the
  // replies' row bytes.
  Status LookupRowsInto(const std::string& table, std::span<const std::uint64_t> ids,
                        std::uint64_t content_id, std::size_t row_bytes, std::span<std::byte> out,
                        std::uint64_t* wire_bytes);
  // LookupRowsInto, the rows left where the replies brought them: row ids[k] at held->rows[k],
  // inside gRPC's receive buffers (each reply appended to held->pieces). Only a row split
  // between two buffers is copied (docs/PROTOCOL.md, "Lookup").
  Status LookupRowsHeld(const std::string& table, std::span<const std::uint64_t> ids,
                        std::uint64_t content_id, std::size_t row_bytes, HeldRows* held,
                        std::uint64_t* wire_bytes);

  // The row hashes and block checksums of version `expected_content_id` of a table of `rows`
  // rows (RowHashes RPCs of up to 262144 rows each, up to four at a time); *bytes grows by the
  // replies' size.
  Status RowHashes(const std::string& table, std::uint64_t expected_content_id, std::uint64_t rows,
                   std::vector<std::uint64_t>* row_hashes,
                   std::vector<std::uint64_t>* block_checksums, std::uint64_t* bytes,
                   bool* verified);
  // The same for a caller that holds a copy of some version of the table: `local(upto)` returns
  // the copy's row hashes, one a row, those of rows [0, upto) computed (it may block until they
  // are). First one hash per group of `group_rows` rows (2 to 65536) comes, a group_rows-th of
  // the bytes, then the row hashes of the groups whose hash differs from the copy's
  // (docs/PROTOCOL.md, "Row hashes"): segment by segment of the table (an eighth, at least
  // kMinSegmentRows rows), each asked for on a thread of its own as soon as the copy's hashes of
  // that segment are in, and handed to `arrived` (when given) from that thread, with the copy's
  // hashes. Those groups go to *groups (ascending) and their rows' hashes to *row_hashes, group
  // after group; every other row's hash equals the copy's, with XXH3-64's certainty. A server
  // that sends no group hashes (one older than group_rows) is asked for every row's hash
  // instead: *groups is then empty and *row_hashes holds one a row, which *answered_group_rows
  // (0 then, group_rows otherwise) tells apart from no group differing; `arrived` is not called.
  static constexpr std::uint64_t kMinSegmentRows = 65536;
  using LocalRowHashes = std::function<std::span<const std::uint64_t>(std::uint64_t upto)>;
  // (groups that differ, ascending; their rows' hashes at the server, group after group; the
  // copy's hashes of every row, those of these groups computed). An error fails the call.
  using DifferingGroups = std::function<Status(std::span<const std::uint64_t> groups,
                                               std::span<const std::uint64_t> hashes,
                                               std::span<const std::uint64_t> local)>;
  Status RowHashesAgainst(const std::string& table, std::uint64_t expected_content_id,
                          std::uint64_t rows, std::uint32_t group_rows,
                          const LocalRowHashes& local, const DifferingGroups& arrived,
                          std::uint32_t* answered_group_rows, std::vector<std::uint64_t>* groups,
                          std::vector<std::uint64_t>* row_hashes,
                          std::vector<std::uint64_t>* block_checksums, std::uint64_t* bytes,
                          bool* verified);

  // Keys of rows [begin, end) (end: nullopt for all), in row order.
  Result<std::vector<std::string>> Keys(const std::string& table, std::uint64_t begin = 0,
                                        std::optional<std::uint64_t> end = std::nullopt);

 private:
  friend class Loader;
  friend class transport::RowStream;
  struct Impl;
  explicit Client(ConnectOptions options);

  ConnectOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_CLIENT_H_
