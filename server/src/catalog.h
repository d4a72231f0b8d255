// Private: Catalog, the tables of one directory, kept current while the server runs.
//
// Every regular file `NAME.emb` in the directory (not starting with '.') is a table called NAME.
// The catalog opens each with store::Table::Open (which validates it) and keeps one immutable
// TableEntry per name. Refresh() rescans the directory: a file whose identity (device, inode,
// size, mtime) changed is opened again and replaces the old entry, a removed file drops its
// entry, and a file that fails validation is logged and left out (its previous version, if any,
// is dropped too, since the name now refers to something else). Watch() runs Refresh() on a
// background thread every poll interval.
//
// Versions: entries are shared_ptr<const TableEntry>. A reader that got an entry keeps reading
// that version, mapping included, for as long as it holds the pointer, even after the file was
// replaced or removed. The catalog never writes to, creates in, or renames inside the directory.
//
// Thread safety: all methods are safe to call concurrently.
#ifndef EMBSTORE_SERVER_SRC_CATALOG_H_
#define EMBSTORE_SERVER_SRC_CATALOG_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "embstore/common/file_identity.h"
#include "embstore/common/status.h"
#include "embstore/store/table.h"

namespace embstore::server {

// One loaded version of a table. Immutable; shared by every request that reads it.
class TableEntry {
 public:
  ~TableEntry();
  TableEntry(const TableEntry&) = delete;
  TableEntry& operator=(const TableEntry&) = delete;

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }  // absolute
  const FileIdentity& file() const { return file_; }
  std::uint64_t generation() const { return generation_; }
  // XXH3-64 of (rows, dim, dtype, block_rows, every block checksum): see PROTOCOL.md "Versions".
  std::uint64_t content_id() const { return content_id_; }
  const store::Table& table() const { return *table_; }

  // OK while the mapped bytes can be trusted. Corruption once the file was truncated below its
  // mapped size or a page of it failed to read (the bytes read since may be zeros). Costs one
  // fstat.
  Status CheckIntact() const;

  // The hashes of the groups [first, first + out.size()) of `group_rows` rows
  // (store::RowGroupHash of their row hashes; the table's last group is short) into `out`.
  // Groups of 16 rows or more are computed for the whole table on the first call and kept with
  // this version (at most half a byte a row): a sync asks for all of them, and computing them
  // reads every row hash (about a sixth of the server's CPU for a sync of the seed table).
  // Smaller ones are computed for the range asked, each time. Does not check the row hashes
  // against the rows (Table::VerifyRowHashesOnce does).
  Status GroupHashes(std::uint64_t group_rows, std::uint64_t first,
                     std::span<std::uint64_t> out) const;

 private:
  friend class Catalog;
  TableEntry() = default;

  std::string name_;
  std::string path_;
  FileIdentity file_;
  std::uint64_t generation_ = 0;
  std::uint64_t content_id_ = 0;
  int fd_ = -1;  // the mapped inode, for fstat in CheckIntact()
  std::shared_ptr<const store::Table> table_;  // its mapping is guarded (MappingGuard)

  Status ComputeGroupHashes(std::uint64_t group_rows, std::uint64_t first,
                            std::span<std::uint64_t> out) const;

  static constexpr std::uint64_t kMinCachedGroupRows = 16;
  mutable std::mutex groups_mu_;  // one computation at a time; guards the two below
  mutable std::uint64_t group_rows_ = 0;  // 0: none kept yet
  mutable std::vector<std::uint64_t> group_hashes_;  // every group's, of group_rows_ rows
};

struct CatalogOptions {
  std::string dir;
  std::chrono::milliseconds poll_interval{1000};
  bool verify_on_load = false;  // check every block checksum before a file is served
};

// Called with (name, status) when a file is loaded (OK), dropped (NotFound) or rejected.
using CatalogEventFn = std::function<void(const std::string& name, const std::string& path,
                                          std::uint64_t generation, const Status& status)>;

class Catalog {
 public:
  // Scans `options.dir` once. NotFound / IOError when the directory cannot be listed; files that
  // fail to open are reported through `on_event` and skipped, not fatal.
  static Result<std::unique_ptr<Catalog>> Open(const CatalogOptions& options,
                                               CatalogEventFn on_event = nullptr);
  ~Catalog();  // stops the watcher

  // The current version of `name`. InvalidArgument for a bad name, NotFound for an unknown one
  // (saying why, when its file is there but was rejected).
  Result<std::shared_ptr<const TableEntry>> Get(std::string_view name) const;
  // Every table, sorted by name.
  std::vector<std::shared_ptr<const TableEntry>> List() const;

  // Rescans the directory now. Only a failure to list the directory is an error.
  Status Refresh();
  // Starts (once) the background thread that calls Refresh() every poll interval.
  void Watch();
  void StopWatching();

  const std::string& dir() const { return dir_; }

 private:
  Catalog(CatalogOptions options, CatalogEventFn on_event);
  Result<std::shared_ptr<TableEntry>> Load(const std::string& name, const std::string& path);

  CatalogOptions options_;
  std::string dir_;  // absolute, no trailing '/'
  CatalogEventFn on_event_;
  std::mutex refresh_mu_;  // one Refresh() at a time
  mutable std::mutex mu_;  // guards entries_, rejected_why_ and next_generation_
  std::map<std::string, std::shared_ptr<const TableEntry>, std::less<>> entries_;
  std::map<std::string, FileIdentity, std::less<>> rejected_;  // files that failed, by name
  // Why each file that is there but not served failed to open (guarded by mu_), for Get().
  std::map<std::string, std::string, std::less<>> rejected_why_;
  std::uint64_t next_generation_ = 1;

  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace embstore::server

#endif  // EMBSTORE_SERVER_SRC_CATALOG_H_
