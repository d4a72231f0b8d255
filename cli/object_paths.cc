#include "object_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "progress.h"

namespace embstore::cli {

Result<std::unique_ptr<objstore::S3Client>> S3FromEnvironment() {
  EMBSTORE_ASSIGN_OR_RETURN(objstore::S3Config config, objstore::S3ConfigFromEnvironment());
  return std::make_unique<objstore::S3Client>(std::move(config));
}

Result<std::string> MakeScratchDir(const std::string& purpose) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/embstore-" + purpose +
                     "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return Status::FromErrno("create a temporary directory like '" + tmpl + "'", errno);
  }
  return std::string(buf.data());
}

Result<objstore::TransferStats> DownloadTableTo(objstore::S3Client& s3, const objstore::S3Url& url,
                                                const std::string& dest, bool overwrite,
                                                const std::string& command) {
  Progress progress(command + " " + url.ToString());
  objstore::TransferOptions o;
  o.overwrite = overwrite;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.Update(done, total);
    return true;
  };
  auto stats = objstore::DownloadTable(s3, url, dest, o);
  progress.Finish();
  return stats;
}

Result<std::unique_ptr<LocalTable>> LocalTable::Fetch(const std::string& arg,
                                                      const std::string& command, bool verify) {
  if (!objstore::IsS3Url(arg)) return std::unique_ptr<LocalTable>(new LocalTable(arg, arg, ""));
  EMBSTORE_ASSIGN_OR_RETURN(objstore::S3Url url, objstore::ParseS3Url(arg));
  if (url.key.empty() || url.key.back() == '/') {
    return Status::InvalidArgument("'" + arg + "' names a bucket or prefix, not a table object");
  }
  EMBSTORE_ASSIGN_OR_RETURN(auto s3, S3FromEnvironment());
  EMBSTORE_ASSIGN_OR_RETURN(std::string dir, MakeScratchDir(command));
  std::unique_ptr<LocalTable> local(
      new LocalTable(arg, dir + "/" + std::filesystem::path(url.key).filename().string(), dir));
  Progress progress(command + " " + arg);
  objstore::TransferOptions o;
  o.verify = verify;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.Update(done, total);
    return true;
  };
  auto stats = verify ? objstore::DownloadTable(*s3, url, local->path_, o)
                      : objstore::DownloadObject(*s3, url, local->path_, o);
  progress.Finish();
  if (!stats.ok()) return stats.status();
  return local;
}

std::string LocalTable::Named(const std::string& message) const {
  if (dir_.empty()) return message;
  std::string out = message;
  for (std::size_t at; (at = out.find(path_)) != std::string::npos;) out.replace(at, path_.size(), arg_);
  return out;
}

Status LocalTable::Named(const Status& st) const {
  return st.ok() || dir_.empty() ? st : Status(st.code(), Named(st.message()));
}

void LocalTable::Unlink() {
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

LocalTable::~LocalTable() { Unlink(); }

Result<objstore::TransferStats> UploadTableFrom(const std::string& local, const std::string& url,
                                                const std::string& command) {
  EMBSTORE_ASSIGN_OR_RETURN(objstore::S3Url u, objstore::ParseS3Url(url));
  if (u.key.empty() || u.key.back() == '/') {
    return Status::InvalidArgument("'" + url + "' names a bucket or prefix, not an object key");
  }
  EMBSTORE_ASSIGN_OR_RETURN(auto s3, S3FromEnvironment());
  Progress progress(command + " upload " + url);
  objstore::TransferOptions o;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.Update(done, total);
    return true;
  };
  auto stats = objstore::UploadFile(*s3, local, u, o);
  progress.Finish();
  return stats;
}

}  // namespace embstore::cli
