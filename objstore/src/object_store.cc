// ObjectUrl parsing and the store of each scheme (object_store.h).
#include "embstore/objstore/object_store.h"

#include "embstore/common/address.h"
#include "embstore/objstore/s3.h"
#include "embstore/objstore/webhdfs.h"

namespace embstore::objstore {

std::string ObjectUrl::ToString() const {
  return scheme + "://" + authority + (key.empty() ? "" : "/" + key);
}

bool IsObjectUrl(std::string_view s) { return IsS3Url(s) || IsHdfsUrl(s); }

Result<ObjectUrl> ParseObjectUrl(std::string_view s) {
  if (IsS3Url(s)) return ParseS3Url(s);
  if (IsHdfsUrl(s)) return ParseHdfsUrl(s);
  return Status::InvalidArgument(
      "'" + std::string(s) + "' is not an s3://BUCKET/KEY or hdfs://NAMENODE[:PORT]/PATH address");
}

Result<ObjectUrl> ParseObjectKeyUrl(std::string_view s, std::string_view what) {
  EMBSTORE_ASSIGN_OR_RETURN(ObjectUrl u, ParseObjectUrl(s));
  if (u.NamesPrefix()) {
    return Status::InvalidArgument("'" + std::string(s) + "' names " +
                                   (u.scheme == "s3" ? "a bucket or prefix" : "a folder") +
                                   ", not " + std::string(what));
  }
  return u;
}

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(const ObjectUrl& url) {
  if (url.scheme == "s3") {
    EMBSTORE_ASSIGN_OR_RETURN(S3Config config, S3ConfigFromEnvironment());
    return std::unique_ptr<ObjectStore>(new S3Client(std::move(config)));
  }
  if (url.scheme == "hdfs") {
    EMBSTORE_ASSIGN_OR_RETURN(HdfsConfig config, HdfsConfigFromEnvironment());
    return std::unique_ptr<ObjectStore>(new WebHdfsClient(std::move(config)));
  }
  return Status::InvalidArgument("no object store serves '" + url.scheme + "://' addresses");
}

}  // namespace embstore::objstore
