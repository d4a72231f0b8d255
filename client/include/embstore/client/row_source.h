// RowSource: one table, described once, then asked for any row range or key set, written
// straight into memory the caller owns.
//
// A source is a local table file, a table object in S3, a table on a server, or a table sharded
// across servers by a manifest (docs/DEPLOY.md); OpenSource (open_source.h) opens any of them from
// a location string. Each kind is a file of its own behind this interface; callers (the CLI's
// pull, export, inspect and verify, the Python binding) open one source and keep it for every
// chunk of a load, so the table is described once, the file is opened once and connections are
// reused.
//
// Versions: a source pins the version of the table it described when it was opened (its
// content_id). Every later read is of that version: a server that has since replaced the table
// answers FailedPrecondition rather than mixing versions; open a new source to read the new one.
//
// Verification: with ReadOptions::verify (the default), no byte reaches the caller's buffer as
// final data before the checksum block it belongs to has been checked; a key lookup never
// returns a row from a block that fails its checksum (docs/FORMAT.md).
//
// Local files are read with pread(2) into the destination, not through a mapping, so a load
// leaves nothing of the table resident in the process beyond the caller's own buffer, and a file
// truncated underneath is a clean Corruption error. Blocks are verified by worker threads while
// others read.
//
// Thread safety: a RowSource may be shared by several threads; each call runs on its own.
// Callbacks in ReadOptions run on the calling thread.
#ifndef EMBSTORE_CLIENT_ROW_SOURCE_H_
#define EMBSTORE_CLIENT_ROW_SOURCE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/client/types.h"
#include "embstore/common/status.h"

namespace embstore::store {
class Table;
}  // namespace embstore::store

namespace embstore::client {

// Result of CopyKeys: which of the requested keys the table lacks (their rows in the output were
// left untouched), as indices into the request, ascending.
struct KeyCopyResult {
  std::vector<std::uint32_t> missing;
};

// What a delta sync compares (update.h), of the version a source pinned: each row's XXH3-64 and
// each checksum block's checksum.
struct RowDigest {
  // One per row; empty when the source cannot give them without reading every row (an object
  // whose table stores no row hashes): a sync then compares whole blocks.
  std::vector<std::uint64_t> row_hashes;
  // From DigestAgainst, when group_rows > 0: row_hashes holds only the rows of `groups`
  // (ascending), group after group (group g is rows [g * group_rows, (g + 1) * group_rows), the
  // last one shorter); every other row's hash equals the copy's the digest was taken against.
  std::uint32_t group_rows = 0;
  std::vector<std::uint64_t> groups;
  std::vector<std::uint64_t> block_checksums;  // one per checksum block
  bool stored = false;     // the row hashes came from the table's row_hashes tensor
  // The row hashes were checked against rows that passed their block checksums (a server's, or
  // computed here from verified rows), or are stored ones whose checksum matches (a file's or an
  // object's, store::Table::CheckRowHashesChecksum): a sync may trust them. Stored hashes
  // without that checksum are not: a sync then checks every block of its result.
  bool verified = false;
  std::uint64_t bytes = 0;  // bytes brought here to get them
  // Bytes of rows brought with the digest, for the sync's CopyRowIds to come (an object's delta,
  // objstore/delta.h, fetched while the copy is hashed; a server's rows that differ from the
  // copy's, looked up while the copy's later rows are hashed).
  std::uint64_t row_bytes = 0;
};

// Where RowSource::WriteRows puts rows: an output that takes writes by offset, such as a file.
class RowSink {
 public:
  virtual ~RowSink() = default;
  // Bytes [offset, offset + the pieces' total size) of the output, counted from the read's first
  // row, as `pieces` to be written one after another. Unless ordered(), called from the read's
  // worker threads at the same time for disjoint ranges, and a range may be written again (rows
  // fetched again after a failed check) before the read succeeds. An error fails the read.
  virtual Status WriteAt(std::uint64_t offset,
                         std::span<const std::span<const std::byte>> pieces) = 0;
  // Whether WriteAt must be called in row order, one call at a time, each range once (a writer
  // that appends).
  virtual bool ordered() const { return false; }
};

class RowSource {
 public:
  virtual ~RowSource() = default;

  // "file", "server", "sharded" or "object".
  virtual std::string_view kind() const = 0;
  // Where it reads from, for messages: the file's path, the target, or the manifest's path.
  virtual const std::string& location() const = 0;
  // The table as it was when the source was opened (the version every read returns).
  const TableDesc& desc() const { return desc_; }
  // Bytes of the table brought here from where it lives since the source was opened: an
  // object's ranged GETs (the opening's header, checksums and keys included), the row payload
  // streamed from servers; 0 for a local file or a server's file read directly.
  virtual std::uint64_t transferred_bytes() const { return 0; }
  // The table file this source reads on this host, for what only a file has (its size, data
  // offset and whole header): a file source's file, a server's own file when it is this host's,
  // an object's private local copy (its header, checksums and keys are whole; rows are fetched
  // as they are read, so read them through CopyRows). Null for anything else.
  virtual const store::Table* local_table() const { return nullptr; }

  // Bytes CopyRows writes for rows [begin, end): rows x row_bytes, or rows x dim x 4 with
  // to_f32. InvalidArgument when begin > end, OutOfRange when end > rows.
  Result<std::uint64_t> OutputBytes(std::uint64_t begin, std::uint64_t end, bool to_f32) const;

  // Rows [begin, end) into `out`, which must hold exactly OutputBytes(begin, end, to_f32) bytes.
  // Nothing is written outside `out`; on error its content is unspecified.
  virtual Result<LoadStats> CopyRows(std::uint64_t begin, std::uint64_t end,
                                     std::span<std::byte> out, const ReadOptions& options) = 0;

  // Rows [begin, end) into `sink` (OutputBytes(begin, end, options.to_f32) bytes in all), with
  // the progress, timeout and cancellation of `options` covering the whole read. A server
  // source streaming raw rows hands each chunk to an unordered sink from gRPC's receive buffers,
  // so rows are not copied on the way; otherwise windows of about 64 MiB are read with CopyRows
  // into one of two buffers while the other is written, in row order: memory stays at two
  // windows whatever the range's size.
  virtual Result<LoadStats> WriteRows(std::uint64_t begin, std::uint64_t end, RowSink& sink,
                                      const ReadOptions& options);

  // The rows of `keys`, in request order, into `out` (keys.size() rows of the output type);
  // rows of keys the table lacks are left as they were and listed in the result.
  // FailedPrecondition when the table has no keys.
  virtual Result<KeyCopyResult> CopyKeys(std::span<const std::string> keys,
                                         std::span<std::byte> out, const ReadOptions& options) = 0;

  // Keys of rows [begin, end), in row order (checked against their checksums when the table has
  // them). FailedPrecondition when the table has no keys.
  virtual Result<std::vector<std::string>> Keys(std::uint64_t begin, std::uint64_t end) = 0;

  // The row hashes and block checksums of the pinned version (docs/FORMAT.md, "Row hashes";
  // PROTOCOL.md, "Row hashes"). Unimplemented for sources that have none to give (a sharded
  // table).
  virtual Result<RowDigest> Digest();

  // Digest() for a sync that holds a copy of some version: `local(upto)` returns the copy's row
  // hashes, one a row, those of rows [0, upto) computed (it may block until they are, and they
  // are computed in about row order). A source may then move less: a server first sends one hash
  // per group of rows, then the row hashes of the groups that differ from the copy's
  // (PROTOCOL.md, "Row hashes"), and looks up the rows that differ while the copy's later rows
  // are still being hashed, for the CopyRowIds that follows. By default, Digest().
  virtual Result<RowDigest> DigestAgainst(
      const std::function<std::span<const std::uint64_t>(std::uint64_t upto)>& local);

  // Rows `ids` (ascending, each < rows) into `out`, one after another, in the table's dtype
  // (ids.size() * row_bytes bytes), every row checked (against its block's checksum, or its own
  // hash) before it counts; LoadStats::wire_bytes says what moved. By default runs of
  // consecutive ids are read with CopyRows; servers send the rows by id, objects fetch the rows'
  // bytes and check each against its stored hash.
  virtual Result<LoadStats> CopyRowIds(std::span<const std::uint64_t> ids, std::span<std::byte> out,
                                       const ReadOptions& options);

  // CopyRowIds for a caller that only reads the rows once more (a sync applying them): they are
  // handed over where they are. Afterwards the bytes of row ids[k] start at held->rows[k], which
  // held->pieces keeps alive. By default one piece filled by CopyRowIds; a server hands over the rows its
  // DigestAgainst looked up, in the memory they arrived in, so that each changed row is copied
  // once more only, to its place.
  virtual Result<LoadStats> HoldRowIds(std::span<const std::uint64_t> ids, HeldRows* held,
                                       const ReadOptions& options);

 protected:
  TableDesc desc_;
};

// A local table file. Validates it (store::Table::Open) and keeps it open.
Result<std::unique_ptr<RowSource>> OpenFileSource(const std::string& path);

// A table object in an object store: "s3://BUCKET/KEY" (S3 or an S3-compatible store; AWS_*
// variables and profiles) or "hdfs://NAMENODE[:PORT]/PATH" (WebHDFS; HADOOP_USER_NAME and
// EMBSTORE_HDFS_*), see objstore/object_store.h. Opening fetches the header, checksums and keys;
// reads fetch only the checksum blocks their rows touch (parallel ranged reads of the version
// opened: a replaced object is FailedPrecondition), each verified before its rows are copied.
// kind() is "object".
Result<std::unique_ptr<RowSource>> OpenObjectSource(const std::string& url);

// Table `table` on the server `connect.target`, described now. With `allow_local`, when the
// server's file is this host's file (same device, inode, size, mtime and content id), reads go
// to that file directly, as a file source would read it. A positive `open_timeout` bounds the
// opening (connecting and describing; DeadlineExceeded) when it is shorter than rpc_timeout: a
// load with a timeout passes what it has left.
Result<std::unique_ptr<RowSource>> OpenServerSource(
    const ConnectOptions& connect, const std::string& table, bool allow_local = true,
    std::chrono::milliseconds open_timeout = std::chrono::milliseconds(0));

// The logical table of a shard manifest: OpenShardedSource (open_source.h).

}  // namespace embstore::client

#endif  // EMBSTORE_CLIENT_ROW_SOURCE_H_
