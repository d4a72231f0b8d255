#include "embstore/common/write_file.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <string>
#include <vector>

namespace embstore {

Status WriteAllAt(int fd, std::uint64_t offset, std::span<const std::byte> bytes,
                  std::string_view what) {
  const std::span<const std::byte> one[] = {bytes};
  return WriteAllAt(fd, offset, one, what);
}

Status WriteAllAt(int fd, std::uint64_t offset, std::span<const std::span<const std::byte>> pieces,
                  std::string_view what) {
  std::vector<iovec> iov;
  iov.reserve(std::min<std::size_t>(pieces.size(), IOV_MAX));
  std::size_t next = 0;     // the first piece not yet in `iov`
  std::size_t skip = 0;     // bytes of pieces[next] already written (a short write ended there)
  while (next < pieces.size()) {
    iov.clear();
    for (std::size_t i = next; i < pieces.size() && iov.size() < IOV_MAX; ++i) {
      const std::size_t from = i == next ? skip : 0;
      if (pieces[i].size() == from) continue;
      iov.push_back({const_cast<std::byte*>(pieces[i].data()) + from, pieces[i].size() - from});
    }
    if (iov.empty()) break;
    const ssize_t n = ::pwritev(fd, iov.data(), static_cast<int>(iov.size()),
                                static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno("write '" + std::string(what) + "'", errno);
    }
    if (n == 0) return Status::IOError("write '" + std::string(what) + "': nothing was written");
    offset += static_cast<std::uint64_t>(n);
    // Advance past what was written: whole pieces, then part of one.
    std::size_t left = static_cast<std::size_t>(n);
    while (next < pieces.size() && left >= pieces[next].size() - skip) {
      left -= pieces[next].size() - skip;
      skip = 0;
      ++next;
    }
    skip += left;
  }
  return Status::OK();
}

}  // namespace embstore
