#include "input.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace embstore::convert {
namespace {

// Reads a file descriptor, remembering up to a few bytes that were read to sniff the magic.
class FdReader {
 public:
  FdReader(int fd, bool owned) : fd_(fd), owned_(owned) {}
  ~FdReader() {
    if (owned_ && fd_ >= 0) ::close(fd_);
  }
  FdReader(const FdReader&) = delete;
  FdReader& operator=(const FdReader&) = delete;

  Result<std::size_t> Read(char* dst, std::size_t n, const std::string& name) {
    std::size_t done = 0;
    if (!pushback_.empty()) {
      done = std::min(n, pushback_.size());
      std::memcpy(dst, pushback_.data(), done);
      pushback_.erase(pushback_.begin(), pushback_.begin() + static_cast<std::ptrdiff_t>(done));
      if (done == n) return done;
    }
    for (;;) {
      ssize_t r = ::read(fd_, dst + done, n - done);
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::FromErrno("read '" + name + "'", errno);
      }
      done += static_cast<std::size_t>(r);
      consumed_ += static_cast<std::uint64_t>(r);
      return done;
    }
  }
  void PushBack(const char* p, std::size_t n) { pushback_.insert(pushback_.begin(), p, p + n); }
  std::uint64_t consumed() const { return consumed_; }

 private:
  int fd_;
  bool owned_;
  std::vector<char> pushback_;
  std::uint64_t consumed_ = 0;
};

class RawInput final : public Input {
 public:
  RawInput(std::unique_ptr<FdReader> r) : r_(std::move(r)) {}
  Result<std::size_t> Read(char* dst, std::size_t n) override {
    return r_->Read(dst, n, display_name_);
  }
  std::uint64_t consumed() const override { return r_->consumed(); }
  void Init(std::string name, std::uint64_t size, std::int64_t mtime) {
    display_name_ = std::move(name);
    stored_size_ = size;
    mtime_unix_ = mtime;
  }

 private:
  std::unique_ptr<FdReader> r_;
};

class MappedInput final : public Input {
 public:
  MappedInput(std::string name, const char* base, std::size_t size, std::int64_t mtime)
      : base_(base), size_(size) {
    display_name_ = std::move(name);
    stored_size_ = size;
    mtime_unix_ = mtime;
  }
  ~MappedInput() override { ::munmap(const_cast<char*>(base_), size_); }
  std::string_view Mapped() const override { return {base_, size_}; }
  void ReleaseMapped(std::uint64_t upto) override {
    // Drop whole pages below `upto` from this process's page tables (they stay in the page
    // cache), so resident memory does not grow with the input.
    const std::uint64_t page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    std::uint64_t end = (upto / page) * page;
    if (end > released_) {
      ::madvise(const_cast<char*>(base_) + released_, end - released_, MADV_DONTNEED);
      released_ = end;
    }
  }
  Result<std::size_t> Read(char*, std::size_t) override {
    return Status::Internal("Read() on a mapped input");
  }
  std::uint64_t consumed() const override { return released_; }

 private:
  const char* base_;
  std::size_t size_;
  std::uint64_t released_ = 0;
};

class GzipInput final : public Input {
 public:
  explicit GzipInput(std::unique_ptr<FdReader> r) : r_(std::move(r)), in_(1 << 18) {
    std::memset(&zs_, 0, sizeof(zs_));
  }
  ~GzipInput() override {
    if (initialized_) inflateEnd(&zs_);
  }
  Status Init(std::string name, std::uint64_t size, std::int64_t mtime) {
    display_name_ = std::move(name);
    stored_size_ = size;
    mtime_unix_ = mtime;
    gzip_ = true;
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) {
      return Status::Internal("zlib inflateInit2 failed for '" + display_name_ + "'");
    }
    initialized_ = true;
    return Status::OK();
  }
  Result<std::size_t> Read(char* dst, std::size_t n) override {
    std::size_t done = 0;
    while (done < n && !finished_) {
      if (zs_.avail_in == 0) {
        EMBSTORE_ASSIGN_OR_RETURN(std::size_t got, r_->Read(in_.data(), in_.size(), display_name_));
        if (got == 0) {
          if (member_started_) {
            return Status::Corruption(display_name_ +
                                      ": gzip data ends early (truncated or damaged file)");
          }
          finished_ = true;
          break;
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(got);
      }
      zs_.next_out = reinterpret_cast<Bytef*>(dst + done);
      zs_.avail_out = static_cast<uInt>(std::min<std::size_t>(n - done, 1u << 30));
      member_started_ = true;
      int rc = inflate(&zs_, Z_NO_FLUSH);
      done = static_cast<std::size_t>(reinterpret_cast<char*>(zs_.next_out) - dst);
      if (rc == Z_STREAM_END) {
        // Concatenated gzip members form one stream (as gzip -d treats them).
        member_started_ = false;
        if (inflateReset(&zs_) != Z_OK) return Status::Internal("zlib inflateReset failed");
        continue;
      }
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return Status::Corruption(display_name_ + ": bad gzip data (" +
                                  (zs_.msg != nullptr ? zs_.msg : "zlib error") + ")");
      }
    }
    return done;
  }
  std::uint64_t consumed() const override { return r_->consumed() - zs_.avail_in; }

 private:
  std::unique_ptr<FdReader> r_;
  std::vector<char> in_;
  z_stream zs_;
  bool initialized_ = false;
  bool finished_ = false;
  bool member_started_ = false;
};

}  // namespace

Result<std::unique_ptr<Input>> Input::Open(const std::string& path) {
  const bool is_stdin = path == "-";
  const std::string name = is_stdin ? std::string("<stdin>") : path;
  int fd = is_stdin ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open input '" + path + "'", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    if (!is_stdin) ::close(fd);
    return Status::FromErrno("stat input '" + path + "'", err);
  }
  if (S_ISDIR(st.st_mode)) {
    if (!is_stdin) ::close(fd);
    return Status::InvalidArgument("input '" + path + "' is a directory");
  }
  const bool regular = S_ISREG(st.st_mode);
  const std::uint64_t size = regular ? static_cast<std::uint64_t>(st.st_size) : 0;
  const std::int64_t mtime = regular ? static_cast<std::int64_t>(st.st_mtime) : 0;
  auto reader = std::make_unique<FdReader>(fd, !is_stdin);

  // Sniff the gzip magic (1f 8b).
  char magic[2];
  std::size_t got = 0;
  while (got < 2) {
    EMBSTORE_ASSIGN_OR_RETURN(std::size_t r, reader->Read(magic + got, 2 - got, name));
    if (r == 0) break;
    got += r;
  }
  const bool gz = got == 2 && static_cast<unsigned char>(magic[0]) == 0x1f &&
                  static_cast<unsigned char>(magic[1]) == 0x8b;
  if (gz) {
    reader->PushBack(magic, got);
    auto in = std::make_unique<GzipInput>(std::move(reader));
    EMBSTORE_RETURN_NOT_OK(in->Init(name, size, mtime));
    return std::unique_ptr<Input>(std::move(in));
  }
  if (regular && !is_stdin && size > 0) {
    void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base != MAP_FAILED) {
      ::madvise(base, size, MADV_SEQUENTIAL);
      return std::unique_ptr<Input>(
          std::make_unique<MappedInput>(name, static_cast<const char*>(base), size, mtime));
    }
  }
  reader->PushBack(magic, got);
  auto in = std::make_unique<RawInput>(std::move(reader));
  in->Init(name, size, mtime);
  return std::unique_ptr<Input>(std::move(in));
}

}  // namespace embstore::convert
