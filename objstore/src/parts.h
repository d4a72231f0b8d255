// Pieces the transfers of every store share: running numbered parts on threads with progress, and
// reading a local file being sent. Internal to embstore::objstore.
#ifndef EMBSTORE_OBJSTORE_PARTS_H_
#define EMBSTORE_OBJSTORE_PARTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "embstore/common/status.h"

namespace embstore::objstore::internal {

// Runs part(i) for i in [0, count) on `parallel` threads, stopping at the first error; calls
// `progress(done, total)` from this thread after each part (and at least ten times a second); a
// progress that returns false cancels (Cancelled). The first error wins.
Status RunParts(std::uint64_t count, int parallel, std::uint64_t total,
                const std::atomic<std::uint64_t>& done,
                const std::function<bool(std::uint64_t, std::uint64_t)>& progress,
                const std::function<Status(std::uint64_t)>& part);

// A local file opened for reading, with its size at open; closed on destruction.
class LocalFile {
 public:
  static Result<LocalFile> Open(const std::string& path);
  LocalFile(LocalFile&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_), size_(o.size_) {
    o.fd_ = -1;
  }
  LocalFile& operator=(LocalFile&&) = delete;
  ~LocalFile();

  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Exactly out.size() bytes at `offset`; IOError when the file shrank.
  Status ReadAt(std::uint64_t offset, std::span<std::byte> out) const;

 private:
  LocalFile(std::string path, int fd, std::uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  std::string path_;
  int fd_;
  std::uint64_t size_;
};

}  // namespace embstore::objstore::internal

#endif  // EMBSTORE_OBJSTORE_PARTS_H_
