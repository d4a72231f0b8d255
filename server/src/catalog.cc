#include "catalog.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <set>

#include "embstore/store/checksum.h"
#include "embstore/store/names.h"

namespace embstore::server {
namespace {

}  // namespace

TableEntry::~TableEntry() {
  table_.reset();
  if (fd_ >= 0) ::close(fd_);
}

Status TableEntry::CheckIntact() const {
  if (!table_->CheckIntact().ok()) {
    return Status::Corruption("table '" + name_ + "': part of file " + path_ +
                              " could not be read while it was being served (truncated or an I/O "
                              "error); the data sent from it is not trustworthy");
  }
  struct stat st;
  if (::fstat(fd_, &st) != 0) {
    return Status::FromErrno("table '" + name_ + "': fstat " + path_, errno);
  }
  if (static_cast<std::uint64_t>(st.st_size) < file_.size) {
    return Status::Corruption("table '" + name_ + "': file " + path_ + " shrank from " +
                              std::to_string(file_.size) + " to " + std::to_string(st.st_size) +
                              " bytes while being served (files must be replaced by rename, "
                              "never rewritten in place)");
  }
  return Status::OK();
}

Status TableEntry::GroupHashes(std::uint64_t group_rows, std::uint64_t first,
                               std::span<std::uint64_t> out) const {
  const store::Table& t = *table_;
  const std::uint64_t total = group_rows == 0 ? 0 : (t.rows() + group_rows - 1) / group_rows;
  if (group_rows == 0 || first > total || out.size() > total - first) {
    return Status::InvalidArgument("hashes of groups [" + std::to_string(first) + ", " +
                                   std::to_string(first + out.size()) + ") of " +
                                   std::to_string(group_rows) + " rows of table '" + name_ +
                                   "', which has " + std::to_string(total) + " such groups");
  }
  if (group_rows >= kMinCachedGroupRows) {
    std::lock_guard lock(groups_mu_);
    if (group_rows_ != group_rows) {
      std::vector<std::uint64_t> all(total);
      EMBSTORE_RETURN_NOT_OK(ComputeGroupHashes(group_rows, 0, all));
      group_rows_ = group_rows;
      group_hashes_ = std::move(all);
    }
    std::copy_n(group_hashes_.begin() + first, out.size(), out.begin());
    return Status::OK();
  }
  return ComputeGroupHashes(group_rows, first, out);
}

Status TableEntry::ComputeGroupHashes(std::uint64_t group_rows, std::uint64_t first,
                                      std::span<std::uint64_t> out) const {
  const store::Table& t = *table_;
  const std::uint64_t begin = first * group_rows;
  const std::uint64_t end = std::min(t.rows(), (first + out.size()) * group_rows);
  // The row hashes a few groups at a time, through a buffer that stays in cache.
  const std::uint64_t step = group_rows * std::max<std::uint64_t>(1, 8192 / group_rows);
  std::vector<std::uint64_t> hashes(std::min(step, end - begin));
  for (std::uint64_t at = begin; at < end; at += step) {
    const std::uint64_t count = std::min(step, end - at);
    const std::span<std::uint64_t> part(hashes.data(), count);
    EMBSTORE_RETURN_NOT_OK(t.RowHashes(at, at + count, part));
    for (std::uint64_t row = 0; row < count; row += group_rows) {
      const std::uint64_t len = std::min(count - row, group_rows);
      out[(at - begin + row) / group_rows] = store::RowGroupHash(part.subspan(row, len));
    }
  }
  return CheckIntact();
}

Catalog::Catalog(CatalogOptions options, CatalogEventFn on_event)
    : options_(std::move(options)), on_event_(std::move(on_event)) {}

Catalog::~Catalog() { StopWatching(); }

Result<std::unique_ptr<Catalog>> Catalog::Open(const CatalogOptions& options,
                                               CatalogEventFn on_event) {
  if (options.dir.empty()) return Status::InvalidArgument("no store directory given");
  char resolved[PATH_MAX];
  if (::realpath(options.dir.c_str(), resolved) == nullptr) {
    return Status::FromErrno("store directory '" + options.dir + "'", errno);
  }
  struct stat st;
  if (::stat(resolved, &st) != 0) return Status::FromErrno("stat '" + options.dir + "'", errno);
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("store directory '" + options.dir + "' is not a directory");
  }
  std::unique_ptr<Catalog> c(new Catalog(options, std::move(on_event)));
  c->dir_ = resolved;
  EMBSTORE_RETURN_NOT_OK(c->Refresh());
  return c;
}

Result<std::shared_ptr<const TableEntry>> Catalog::Get(std::string_view name) const {
  EMBSTORE_RETURN_NOT_OK(store::ValidateTableName(name));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    // A file that is there but failed to open: the client is told why, not only the log.
    auto why = rejected_why_.find(name);
    if (why != rejected_why_.end()) {
      return Status::NotFound("table '" + std::string(name) + "' is not served: its file in " +
                              dir_ + " was rejected: " + why->second);
    }
    return Status::NotFound("table '" + std::string(name) + "' not found in " + dir_);
  }
  return it->second;
}

std::vector<std::shared_ptr<const TableEntry>> Catalog::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const TableEntry>> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back(e);
  return out;
}

Result<std::shared_ptr<TableEntry>> Catalog::Load(const std::string& name,
                                                  const std::string& path) {
  // The fd and the mapping must refer to the same inode. Open the fd first, then map by path, and
  // check that the path still names the fd's inode; a rename in between shows up as a mismatch
  // and the next scan picks up the new file.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno("fstat " + path, err);
  }
  FileIdentity id = IdentityOf(st);
  store::OpenOptions open_options;
  open_options.verify = options_.verify_on_load;
  auto table = store::Table::Open(path, open_options);
  if (!table.ok()) {
    ::close(fd);
    return table.status();
  }
  struct stat after;
  if (::stat(path.c_str(), &after) != 0 || IdentityOf(after) != id) {
    ::close(fd);
    return Status::Unavailable("file " + path + " changed while it was being opened");
  }
  std::shared_ptr<TableEntry> e(new TableEntry());
  e->name_ = name;
  e->path_ = path;
  e->file_ = id;
  e->fd_ = fd;
  // The table's mapping is guarded from the moment it is opened (store::Table).
  e->content_id_ = store::ContentId(**table);
  e->table_ = std::move(table).value();
  EMBSTORE_RETURN_NOT_OK(e->CheckIntact());
  return e;
}

Status Catalog::Refresh() {
  std::lock_guard<std::mutex> refresh_lock(refresh_mu_);
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return Status::FromErrno("list store directory " + dir_, errno);
  std::map<std::string, std::pair<std::string, FileIdentity>> found;
  errno = 0;
  while (struct dirent* de = ::readdir(d)) {
    std::string fname = de->d_name;
    std::optional<std::string> table = store::TableNameOfEntry(fname);
    if (!table) continue;
    const std::string& name = *table;
    std::string path = dir_ + "/" + fname;
    struct stat st;
    // stat follows symlinks: a link inside the directory to a table elsewhere is served, but
    // only names listed here can ever be opened.
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    found.emplace(std::move(name), std::make_pair(std::move(path), IdentityOf(st)));
  }
  ::closedir(d);

  // Work out what changed without holding mu_ during the (slow) opens.
  std::map<std::string, std::shared_ptr<const TableEntry>, std::less<>> current;
  {
    std::lock_guard<std::mutex> lock(mu_);
    current = entries_;
  }
  std::vector<std::string> removed;
  for (const auto& [name, e] : current) {
    if (!found.count(name)) removed.push_back(name);
  }
  struct Loaded {
    std::string name;
    std::shared_ptr<TableEntry> entry;  // null: rejected
  };
  std::vector<Loaded> loaded;
  std::vector<std::pair<std::string, std::string>> failed;  // (name, why) of files rejected now
  for (const auto& [name, pf] : found) {
    const auto& [path, id] = pf;
    auto it = current.find(name);
    if (it != current.end() && it->second->file() == id) continue;
    auto rej = rejected_.find(name);
    if (rej != rejected_.end() && rej->second == id) continue;  // already reported
    auto entry = Load(name, path);
    if (entry.ok()) {
      loaded.push_back({name, std::move(entry).value()});
      rejected_.erase(name);
    } else {
      if (entry.status().code() != StatusCode::kUnavailable) rejected_[name] = id;
      failed.emplace_back(name, entry.status().message());
      if (on_event_) on_event_(name, path, 0, entry.status());
      if (it != current.end()) loaded.push_back({name, nullptr});
    }
  }
  for (auto it = rejected_.begin(); it != rejected_.end();) {
    it = found.count(it->first) ? std::next(it) : rejected_.erase(it);
  }

  std::vector<std::shared_ptr<const TableEntry>> dropped;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& name : removed) {
      auto it = entries_.find(name);
      if (it != entries_.end()) {
        dropped.push_back(it->second);
        entries_.erase(it);
      }
    }
    for (auto& l : loaded) {
      auto it = entries_.find(l.name);
      if (it != entries_.end()) {
        dropped.push_back(it->second);
        entries_.erase(it);
      }
      if (l.entry) {
        l.entry->generation_ = next_generation_++;
        entries_.emplace(l.name, l.entry);
        rejected_why_.erase(l.name);
      }
    }
    for (auto& [name, why] : failed) rejected_why_[name] = std::move(why);
    for (auto it = rejected_why_.begin(); it != rejected_why_.end();) {
      it = found.count(it->first) ? std::next(it) : rejected_why_.erase(it);
    }
  }
  if (on_event_) {
    for (const auto& name : removed) {
      on_event_(name, dir_ + "/" + name + std::string(store::kTableSuffix), 0,
                Status::NotFound("file removed"));
    }
    for (const auto& l : loaded) {
      if (l.entry) on_event_(l.name, l.entry->path(), l.entry->generation(), Status::OK());
    }
  }
  return Status::OK();
}

void Catalog::Watch() {
  std::lock_guard<std::mutex> lock(watch_mu_);
  if (watcher_.joinable() || stop_) return;
  watcher_ = std::thread([this] {
    std::unique_lock<std::mutex> wl(watch_mu_);
    while (!stop_) {
      watch_cv_.wait_for(wl, options_.poll_interval);
      if (stop_) break;
      wl.unlock();
      Status st = Refresh();
      if (!st.ok() && on_event_) on_event_("", dir_, 0, st);
      wl.lock();
    }
  });
}

void Catalog::StopWatching() {
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

}  // namespace embstore::server
