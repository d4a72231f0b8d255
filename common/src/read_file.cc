#include "embstore/common/read_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

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

}  // namespace embstore
