#include "embstore/common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace embstore {

Result<std::string> ReadSmallFile(const std::string& path, std::string_view what,
                                  std::size_t max_bytes) {
  const std::string reading = "cannot read " + std::string(what) + " '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(reading, errno);
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::FromErrno(reading, err);
    }
    if (n == 0) break;
    if (out.size() + static_cast<std::size_t>(n) > max_bytes) {
      ::close(fd);
      return Status::InvalidArgument(reading + ": it is larger than " + std::to_string(max_bytes) +
                                     " bytes");
    }
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

Status ReadAllAt(int fd, std::uint64_t offset, std::span<std::byte> out, std::string_view what) {
  for (std::size_t got = 0; got < out.size();) {
    const ssize_t r =
        ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno(what, errno);
    if (r == 0) {
      return Status::IOError(std::string(what) + ": the file ended " +
                             std::to_string(out.size() - got) +
                             " bytes early (truncated underneath?)");
    }
    got += static_cast<std::size_t>(r);
  }
  return Status::OK();
}

}  // namespace embstore
