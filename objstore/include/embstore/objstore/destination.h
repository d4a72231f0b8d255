// TableDestination: where a new table goes, whatever the location. A local path is written in
// place (the writers publish it atomically themselves); an s3:// or hdfs:// key is written to a
// private scratch file first and then uploaded (UploadFile: the object appears whole or not at
// all), so every writer (convert, the Python writers) says "write here, then publish" the same way.
//
// Open() refuses an existing object without `overwrite` before any work is done (AlreadyExists
// naming it; the writers check local paths themselves, at creation and again at publication), and
// reports a store that cannot be reached then rather than after a long write.
//
// Publishing over an earlier version of a table object also uploads the rows that changed, beside
// it (delta.h), so that copies of that version can be brought up to date in one GET.
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
  // bytes of neither). The scratch file is removed either way. When the object held an earlier
  // version of the table, the rows that differ from it are written as its delta object and
  // uploaded after it (delta.h); otherwise any delta object is removed. The delta is a shortcut
  // for readers: when it cannot be made or uploaded, the table is published all the same and
  // delta() says why there is none.
  Result<TransferStats> Publish(const TransferOptions& options = {});

  // After Publish: the delta uploaded beside the table (rows 0: none; `skipped` says why).
  struct Delta {
    std::uint64_t rows = 0;
    std::uint64_t bytes = 0;
    std::string skipped;
  };
  const Delta& delta() const { return delta_; }

 private:
  TableDestination() = default;
  std::string dest_;
  std::string local_;
  std::optional<ObjectUrl> url_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<ScratchDir> scratch_;
  Delta delta_;
};

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_DESTINATION_H_
