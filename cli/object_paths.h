// s3:// and hdfs:// transfers of whole tables in the CLI. A table written to a bucket (convert) is
// written locally first and then uploaded as one multipart upload, so the object appears whole or
// not at all; a whole object pulled to .emb is one verified download. Everything that reads rows of
// an object goes through client::OpenSource, which fetches only the blocks it reads. Configuration:
// objstore::OpenObjectStore (S3: AWS_* variables and profiles; HDFS: HADOOP_USER_NAME and
// EMBSTORE_HDFS_*).
#ifndef EMBSTORE_CLI_OBJECT_PATHS_H_
#define EMBSTORE_CLI_OBJECT_PATHS_H_

#include <memory>
#include <string>
#include <vector>

#include "embstore/common/status.h"
#include "embstore/objstore/destination.h"
#include "embstore/objstore/object_store.h"
#include "embstore/objstore/transfer.h"

namespace embstore::cli {

// Downloads a table object to `dest` (verified, atomic), with a progress line labelled `command`.
Result<objstore::TransferStats> DownloadTableTo(objstore::ObjectStore& store,
                                                const objstore::ObjectUrl& url,
                                                const std::string& dest, bool overwrite,
                                                const std::string& command);

// Publishes a table written to `dest.local_path()` (an upload for an object), with a progress line.
Result<objstore::TransferStats> PublishWithProgress(objstore::TableDestination& dest,
                                                    const std::string& command);

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_OBJECT_PATHS_H_
