#include "object_paths.h"

#include <cstdio>

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
  if (stats.ok() && dest.delta().rows > 0) {
    std::fprintf(stderr,
                 "embstore %s: uploaded the %llu rows that changed since the version it replaced "
                 "as %s.delta (%llu bytes)\n",
                 command.c_str(), static_cast<unsigned long long>(dest.delta().rows),
                 dest.dest().c_str(), static_cast<unsigned long long>(dest.delta().bytes));
  }
  return stats;
}

}  // namespace embstore::cli
