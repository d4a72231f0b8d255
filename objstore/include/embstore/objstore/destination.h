// TableDestination: where a new table goes, whatever the location. A local path is written in
// place (the writers publish it atomically themselves); an s3:// or hdfs:// key is written to a
// private scratch file first and then uploaded (UploadFile: the object appears whole or not at
// all), so every writer (convert, the Python writers) says "write here, then publish" the same way.
//
// Open() refuses an existing object without `overwrite` before any work is done (AlreadyExists
// naming it; the writers check local paths themselves, at creation and again at publication), and
// reports a store that cannot be reached then rather than after a long write.
#ifndef EMBSTORE_OBJSTORE_DESTINATION_H_
#define EMBSTORE_OBJSTORE_DESTINATION_H_

#include <memory>
#include <optional>
#include <string>

#include "embstore/common/scratch_dir.h"
#include "embstore/common/status.h"
#include "embstore/objstore/object_store.h"
#include "embstore/objstore/transfer.h"

namespace embstore::objstore {

class TableDestination {
 public:
  // `purpose` names the scratch directory ("embstore-PURPOSE-XXXXXX").
  static Result<std::unique_ptr<TableDestination>> Open(const std::string& dest, bool overwrite,
                                                        const std::string& purpose);
  ~TableDestination();
  TableDestination(const TableDestination&) = delete;
  TableDestination& operator=(const TableDestination&) = delete;

  const std::string& dest() const { return dest_; }
  // Where the writer writes the table: `dest` itself, or a scratch file for an object.
  const std::string& local_path() const { return local_; }
  bool is_object() const { return url_.has_value(); }

  // Uploads the finished local file to the object (nothing to do for a local path; returns the
  // bytes of neither). The scratch file is removed either way.
  Result<TransferStats> Publish(const TransferOptions& options = {});

 private:
  TableDestination() = default;
  std::string dest_;
  std::string local_;
  std::optional<ObjectUrl> url_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<ScratchDir> scratch_;
};

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_DESTINATION_H_
