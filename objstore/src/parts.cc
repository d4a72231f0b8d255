#include "parts.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace embstore::objstore::internal {

Status RunParts(std::uint64_t count, int parallel, std::uint64_t total,
                const std::atomic<std::uint64_t>& done,
                const std::function<bool(std::uint64_t, std::uint64_t)>& progress,
                const std::function<Status(std::uint64_t)>& part) {
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  Status first;
  int running = static_cast<int>(
      std::min<std::uint64_t>(std::max(1, parallel), std::max<std::uint64_t>(count, 1)));
  std::vector<std::thread> threads;
  for (int t = 0; t < running; ++t) {
    threads.emplace_back([&] {
      for (std::uint64_t i; !stop.load() && (i = next.fetch_add(1)) < count;) {
        Status st = part(i);
        std::lock_guard<std::mutex> l(mu);
        if (!st.ok()) {
          if (first.ok()) first = st;
          stop = true;
        }
        cv.notify_all();  // progress after every part
      }
      std::lock_guard<std::mutex> l(mu);
      --running;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    while (running > 0) {
      cv.wait_for(l, std::chrono::milliseconds(100));
      if (progress && !stop.load()) {
        l.unlock();
        const bool go_on = progress(done.load(), total);
        l.lock();
        if (!go_on) {
          if (first.ok()) first = Status::Cancelled("transfer cancelled");
          stop = true;
        }
      }
    }
  }
  for (auto& t : threads) t.join();
  return first;
}

Result<LocalFile> LocalFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open '" + path + "'", errno);
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::FromErrno("stat '" + path + "'", err);
  }
  return LocalFile(path, fd, static_cast<std::uint64_t>(sb.st_size));
}

LocalFile::~LocalFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status LocalFile::ReadAt(std::uint64_t off, std::span<std::byte> out) const {
  std::uint64_t got = 0;
  while (got < out.size()) {
    const ssize_t n =
        ::pread(fd_, out.data() + got, out.size() - got, static_cast<off_t>(off + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read '" + path_ + "'", errno);
    if (n == 0) return Status::IOError("'" + path_ + "' shrank while it was being uploaded");
    got += static_cast<std::uint64_t>(n);
  }
  return Status::OK();
}

}  // namespace embstore::objstore::internal
