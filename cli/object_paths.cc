#include "object_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "progress.h"

namespace embstore::cli {

Result<std::unique_ptr<ScratchDir>> ScratchDir::Make(const std::string& purpose) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/embstore-" + purpose + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return Status::FromErrno("create a temporary directory like '" + tmpl + "'", errno);
  }
  // A signal between mkdtemp and the registration would leave the empty directory: a window of
  // two calls, against the whole transfer before.
  return std::unique_ptr<ScratchDir>(new ScratchDir(buf.data()));
}

ScratchDir::ScratchDir(std::string path) : path_(std::move(path)), on_signal_(path_, true) {}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::File(const std::string& name) {
  std::string p = path_ + "/" + name;
  files_.push_back(std::make_unique<RemoveOnSignal>(p, false));
  return p;
}

Result<objstore::TransferStats> DownloadTableTo(objstore::ObjectStore& store,
                                                const objstore::ObjectUrl& url,
                                                const std::string& dest, bool overwrite,
                                                const std::string& command) {
  Progress progress(command + " " + url.ToString());
  objstore::TransferOptions o;
  o.overwrite = overwrite;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.Update(done, total);
    return true;
  };
  auto stats = objstore::DownloadTable(store, url, dest, o);
  progress.Finish();
  return stats;
}

Result<objstore::TransferStats> UploadTableFrom(const std::string& local, const std::string& url,
                                                const std::string& command) {
  EMBSTORE_ASSIGN_OR_RETURN(objstore::ObjectUrl u,
                            objstore::ParseObjectKeyUrl(url, "an object key"));
  EMBSTORE_ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(u));
  Progress progress(command + " upload " + url);
  objstore::TransferOptions o;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.Update(done, total);
    return true;
  };
  auto stats = objstore::UploadFile(*store, local, u, o);
  progress.Finish();
  return stats;
}

}  // namespace embstore::cli
