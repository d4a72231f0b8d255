#include "object_paths.h"

#include "progress.h"

namespace embstore::cli {

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

Result<objstore::TransferStats> PublishWithProgress(objstore::TableDestination& dest,
                                                    const std::string& command) {
  Progress progress(command + " upload " + dest.dest());
  objstore::TransferOptions o;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.Update(done, total);
    return true;
  };
  auto stats = dest.Publish(o);
  progress.Finish();
  return stats;
}

}  // namespace embstore::cli
