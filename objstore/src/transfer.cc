#include "embstore/objstore/transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "embstore/common/atomic_file.h"
#include "embstore/store/table.h"

namespace embstore::objstore {
namespace {

using Clock = std::chrono::steady_clock;

// Runs part(i) for i in [0, count) on `parallel` threads, stopping at the first error; calls
// `progress` from this thread after each part (and at least ten times a second). The first error
// wins.
Status RunParts(std::uint64_t count, int parallel, std::uint64_t total,
                const std::atomic<std::uint64_t>& done,
                const std::function<bool(std::uint64_t, std::uint64_t)>& progress,
                const std::function<Status(std::uint64_t)>& part) {
  std::atomic<std::uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  Status first;
  int running = static_cast<int>(std::min<std::uint64_t>(std::max(1, parallel), std::max<std::uint64_t>(count, 1)));
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

Result<TransferStats> Download(S3Client& s3, const S3Url& url, const std::string& dest,
                               const TransferOptions& o, bool table) {
  const auto start = Clock::now();
  EMBSTORE_ASSIGN_OR_RETURN(ObjectInfo info, s3.Head(url));
  EMBSTORE_ASSIGN_OR_RETURN(auto file, AtomicFile::Create(dest, o.overwrite));
  const std::uint64_t size = info.size;
  // The whole size first: a full disk fails here, before any download.
  if (size > 0) {
    const int rc = ::posix_fallocate(file->fd(), 0, static_cast<off_t>(size));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
      return Status::FromErrno("allocate " + std::to_string(size) + " bytes for '" +
                                   file->temp_path() + "' (downloading " + url.ToString() + ")",
                               rc);
    }
  }
  const std::uint64_t part = std::max<std::uint64_t>(1 << 20, o.part_bytes);
  const std::uint64_t count = (size + part - 1) / part;
  std::atomic<std::uint64_t> done{0};
  Status st = RunParts(count, o.parallel, size, done, o.progress, [&](std::uint64_t i) -> Status {
    thread_local std::vector<std::byte> buf;
    const std::uint64_t off = i * part;
    const std::uint64_t len = std::min(part, size - off);
    buf.resize(len);
    EMBSTORE_RETURN_NOT_OK(s3.GetRange(url, off, buf, info.etag));
    EMBSTORE_RETURN_NOT_OK(file->WriteAt(off, buf));
    done += len;
    return Status::OK();
  });
  if (!st.ok()) {
    if (st.code() == StatusCode::kFailedPrecondition) {
      st = Status::FailedPrecondition(url.ToString() + " was replaced during the download (ETag " +
                                      info.etag + "); nothing was written to '" + dest +
                                      "'; run again to fetch the new version");
    }
    return st;
  }
  if (table) {
    // The downloaded bytes must be a valid table, every block matching its checksum, before the
    // file gets its final name.
    store::OpenOptions oo;
    auto t = store::Table::Open(file->temp_path(), oo);
    if (!t.ok()) {
      return Status(t.status().code(), url.ToString() + " is not a valid embstore table: " +
                                           t.status().message());
    }
    if (o.verify) {
      Status v = (*t)->VerifyAll();
      if (!v.ok()) {
        return Status(v.code(), url.ToString() + " failed verification: " + v.message());
      }
    }
  }
  EMBSTORE_RETURN_NOT_OK(file->Commit());
  TransferStats stats;
  stats.bytes = size;
  stats.etag = info.etag;
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace

Result<TransferStats> DownloadTable(S3Client& s3, const S3Url& url, const std::string& dest,
                                    const TransferOptions& options) {
  return Download(s3, url, dest, options, /*table=*/true);
}

Result<TransferStats> DownloadObject(S3Client& s3, const S3Url& url, const std::string& dest,
                                     const TransferOptions& options) {
  return Download(s3, url, dest, options, /*table=*/false);
}

Result<TransferStats> UploadFile(S3Client& s3, const std::string& path, const S3Url& url,
                                 const TransferOptions& o) {
  const auto start = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open '" + path + "'", errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat sb;
  if (::fstat(fd, &sb) != 0) return Status::FromErrno("stat '" + path + "'", errno);
  const std::uint64_t size = static_cast<std::uint64_t>(sb.st_size);
  // S3: parts of at least 5 MiB (but the last), at most 10,000 parts.
  std::uint64_t part = std::max<std::uint64_t>(5ull << 20, o.part_bytes);
  part = std::max(part, (size + 9999) / 10000);

  auto read_at = [&](std::uint64_t off, std::span<std::byte> out) -> Status {
    std::uint64_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(off + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::FromErrno("read '" + path + "'", errno);
      if (n == 0) return Status::IOError("'" + path + "' shrank while it was being uploaded");
      got += static_cast<std::uint64_t>(n);
    }
    return Status::OK();
  };

  TransferStats stats;
  stats.bytes = size;
  if (size <= part) {
    std::vector<std::byte> all(size);
    EMBSTORE_RETURN_NOT_OK(read_at(0, all));
    EMBSTORE_RETURN_NOT_OK(s3.Put(url, all));
  } else {
    EMBSTORE_ASSIGN_OR_RETURN(std::string id, s3.CreateMultipartUpload(url));
    const std::uint64_t count = (size + part - 1) / part;
    std::vector<std::string> etags(count);
    std::atomic<std::uint64_t> done{0};
    Status st = RunParts(count, o.parallel, size, done, o.progress, [&](std::uint64_t i) -> Status {
      thread_local std::vector<std::byte> buf;
      const std::uint64_t off = i * part;
      buf.resize(std::min(part, size - off));
      EMBSTORE_RETURN_NOT_OK(read_at(off, buf));
      EMBSTORE_ASSIGN_OR_RETURN(etags[i], s3.UploadPart(url, id, static_cast<int>(i + 1), buf));
      done += buf.size();
      return Status::OK();
    });
    if (st.ok()) {
      auto etag = s3.CompleteMultipartUpload(url, id, etags);
      if (etag.ok()) stats.etag = *etag;
      st = etag.status();
    }
    if (!st.ok()) {
      (void)s3.AbortMultipartUpload(url, id);  // best effort: the store expires it otherwise
      return st;
    }
  }
  if (stats.etag.empty()) {
    auto head = s3.Head(url);
    if (head.ok()) stats.etag = head->etag;
  }
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace embstore::objstore
