// ScratchDir: a fresh private directory under $TMPDIR (or /tmp), "embstore-PURPOSE-XXXXXX", for a
// download or a file on its way to an upload. Removed with everything in it on destruction; on a
// fatal signal (RemoveTempFilesOnSignal, in programs that install it), the files named through
// File() and AtomicFile's temporary files are removed, then the directory, so an interrupted
// command leaves nothing behind.
#ifndef EMBSTORE_COMMON_SCRATCH_DIR_H_
#define EMBSTORE_COMMON_SCRATCH_DIR_H_

#include <memory>
#include <string>
#include <vector>

#include "embstore/common/atomic_file.h"
#include "embstore/common/status.h"

namespace embstore {

class ScratchDir {
 public:
  static Result<std::unique_ptr<ScratchDir>> Make(const std::string& purpose);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  // PATH/name, registered for removal on a fatal signal.
  std::string File(const std::string& name);

 private:
  explicit ScratchDir(std::string path);
  std::string path_;
  RemoveOnSignal on_signal_;
  std::vector<std::unique_ptr<RemoveOnSignal>> files_;
};

}  // namespace embstore

#endif  // EMBSTORE_COMMON_SCRATCH_DIR_H_
