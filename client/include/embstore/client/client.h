// Client: loads tables from an embstore server (docs/PROTOCOL.md) into memory the caller owns.
//
// A Client holds the connection settings for one target ("host:port" or "unix:/path"), with
// optional TLS and a bearer token. Load() fills a caller-provided buffer with a row range of a
// table, using several streams over separate connections in parallel. Every chunk is verified
// against the table's block checksums before it counts; on transient failures (server restart,
// connection reset, UNAVAILABLE) the client backs off and resumes each stream from its last
// verified row, pinned to the table version it started with, so verified bytes are never
// downloaded twice and unverified bytes never reach the caller's buffer as final data.
//
// Local fast path: when the server says the table's file is on this host and the client can open
// the very same file (same device, inode, size, mtime and content id), Load() copies straight from
// the file with pread(2) instead of streaming (client/row_source.h says how), and OpenLocal() hands
// out a read-only mapping of it for zero-copy use.
//
// Thread safety: a Client may be used from several threads at once; each Load() uses its own
// connections. Callbacks in LoadOptions run on the thread that called Load().
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

  // Bytes Load() writes for `desc` and `options` (rows in range x row bytes, or x dim x 4 with
  // to_f32).
  static Result<std::uint64_t> OutputBytes(const TableDesc& desc, const LoadOptions& options);

  // Loads rows [begin_row, end_row) of `table` into `out`, whose size must be OutputBytes().
  Result<LoadStats> Load(const std::string& table, std::span<std::byte> out,
                         const LoadOptions& options = {});
  // The same for a table already described: loads the version `desc` describes (its content_id
  // is pinned; a server that has replaced the table answers FailedPrecondition) without asking
  // the server again.
  Result<LoadStats> LoadDescribed(const TableDesc& desc, std::span<std::byte> out,
                                  const LoadOptions& options = {});

  // The server's file for `table`, mapped read-only, when this host can open it (same device,
  // inode, size, mtime and content id); NotFound otherwise. The zero-copy path.
  Result<std::shared_ptr<const store::Table>> OpenLocal(const TableDesc& desc);

  Result<LookupResult> LookupRows(const std::string& table, std::span<const std::uint64_t> rows);
  Result<LookupResult> LookupKeys(const std::string& table, std::span<const std::string> keys);

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
