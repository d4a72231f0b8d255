#include "embstore/objstore/mirror.h"

#include <filesystem>
#include <set>
#include <system_error>

#include "embstore/common/atomic_file.h"
#include "embstore/common/read_file.h"
#include "embstore/objstore/transfer.h"

namespace embstore::objstore {
namespace fs = std::filesystem;

namespace {

bool IsTableName(const std::string& name) {
  return name.size() > 4 && name.compare(name.size() - 4, 4, ".emb") == 0 && name[0] != '.' &&
         name.find('/') == std::string::npos;
}

std::string EtagFile(const std::string& dir, const std::string& name) {
  return dir + "/." + name + ".etag";
}

std::string CachedEtag(const std::string& dir, const std::string& name) {
  std::error_code ec;
  if (!fs::exists(dir + "/" + name, ec)) return {};
  auto text = ReadSmallFile(EtagFile(dir, name), "cached ETag", 4096);
  return text.ok() ? *text : std::string();
}

Status WriteEtag(const std::string& dir, const std::string& name, const std::string& etag) {
  EMBSTORE_ASSIGN_OR_RETURN(auto f, AtomicFile::Create(EtagFile(dir, name), /*overwrite=*/true));
  EMBSTORE_RETURN_NOT_OK(f->Append(etag));
  return f->Commit();
}

}  // namespace

TableMirror::TableMirror(std::unique_ptr<ObjectStore> store, ObjectUrl prefix, std::string dir,
                         MirrorOptions o)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      dir_(std::move(dir)),
      options_(std::move(o)) {}

Result<std::unique_ptr<TableMirror>> TableMirror::Create(std::unique_ptr<ObjectStore> store,
                                                         ObjectUrl prefix, std::string cache_dir,
                                                         MirrorOptions options) {
  if (!prefix.key.empty() && prefix.key.back() != '/') prefix.key += "/";
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec || !fs::is_directory(cache_dir)) {
    return Status::InvalidArgument("cache directory '" + cache_dir + "' cannot be created: " +
                                   (ec ? ec.message() : std::string("not a directory")));
  }
  return std::unique_ptr<TableMirror>(new TableMirror(std::move(store), std::move(prefix),
                                                      std::move(cache_dir), std::move(options)));
}

TableMirror::~TableMirror() { Stop(); }

void TableMirror::Emit(const MirrorEvent& e) const {
  if (options_.on_event) options_.on_event(e);
}

Result<SyncResult> TableMirror::Sync() {
  EMBSTORE_ASSIGN_OR_RETURN(auto objects, store_->List(prefix_));
  SyncResult r;
  std::set<std::string> present;
  for (const ObjectInfo& o : objects) {
    const std::string name = o.key.substr(prefix_.key.size());
    if (!IsTableName(name)) continue;  // sub-prefixes and other objects are not tables here
    present.insert(name);
    const std::string path = dir_ + "/" + name;
    const ObjectUrl url{prefix_.scheme, prefix_.authority, o.key};
    MirrorEvent e;
    e.kind = MirrorEvent::Kind::kUnchanged;
    e.object = url.ToString();
    e.path = path;
    e.version = o.version;
    e.bytes = o.size;
    if (!o.version.empty() && CachedEtag(dir_, name) == o.version) {
      ++r.unchanged;
      continue;
    }
    TransferOptions t;
    t.overwrite = true;
    t.parallel = options_.parallel;
    auto stats = DownloadTable(*store_, url, path, t);
    Status st = stats.ok() ? WriteEtag(dir_, name, stats->version) : stats.status();
    if (!st.ok()) {
      e.kind = MirrorEvent::Kind::kFailed;
      e.error = st;
      ++r.failed;
    } else {
      e.kind = MirrorEvent::Kind::kFetched;
      e.version = stats->version;
      e.bytes = stats->bytes;
      e.seconds = stats->seconds;
      ++r.fetched;
    }
    Emit(e);
  }
  // Cached tables whose objects are gone.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!IsTableName(name) || present.count(name)) continue;
    const std::string etag_file = EtagFile(dir_, name);
    if (!fs::exists(etag_file)) continue;  // not one of ours
    fs::remove(entry.path(), ec);
    fs::remove(etag_file, ec);
    MirrorEvent e;
    e.kind = MirrorEvent::Kind::kRemoved;
    e.object = ObjectUrl{prefix_.scheme, prefix_.authority, prefix_.key + name}.ToString();
    e.path = entry.path().string();
    Emit(e);
    ++r.removed;
  }
  return r;
}

void TableMirror::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      if (cv_.wait_for(l, options_.interval, [this] { return stop_; })) break;
      l.unlock();
      auto r = Sync();
      if (!r.ok()) {
        MirrorEvent e;
        e.kind = MirrorEvent::Kind::kFailed;
        e.object = prefix_.ToString();
        e.path = dir_;
        e.error = r.status();
        Emit(e);
      }
      l.lock();
    }
  });
}

void TableMirror::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace embstore::objstore
