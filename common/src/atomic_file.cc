#include "embstore/common/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <limits.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "embstore/common/write_file.h"

namespace embstore {
namespace {

// Temporary files and directories that exist right now, for the signal handler of
// RemoveTempFilesOnSignal(). A fixed table the handler can read without locks or allocation: a
// slot is taken (kTaken), filled, then published (kFile or kDirectory); releasing it sets kFree.
// Paths that do not fit, or entries beyond the table's size, are simply not registered (they are
// still removed on every normal exit path).
enum SlotState : int { kFree = 0, kTaken = 1, kFile = 2, kDirectory = 3 };
struct TempSlot {
  std::atomic<int> state{kFree};
  char path[PATH_MAX];
};
constexpr int kTempSlots = 64;
TempSlot g_temp_slots[kTempSlots];

int RegisterTemp(const std::string& path, SlotState kind = kFile) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kTempSlots; ++i) {
    int expected = kFree;
    if (!g_temp_slots[i].state.compare_exchange_strong(expected, kTaken)) continue;
    std::memcpy(g_temp_slots[i].path, path.c_str(), path.size() + 1);
    g_temp_slots[i].state.store(kind, std::memory_order_release);
    return i;
  }
  return -1;
}

void UnregisterTemp(int slot) {
  if (slot >= 0) g_temp_slots[slot].state.store(kFree, std::memory_order_release);
}

// Async-signal-safe: unlink(), rmdir(), atomics, sigaction(), raise(). Files first, so that a
// directory registered together with the files in it is empty when its turn comes.
void RemoveTempsAndReraise(int sig) {
  for (TempSlot& s : g_temp_slots) {
    if (s.state.load(std::memory_order_acquire) == kFile) ::unlink(s.path);
  }
  for (TempSlot& s : g_temp_slots) {
    if (s.state.load(std::memory_order_acquire) == kDirectory) ::rmdir(s.path);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);  // dies of the signal, as it would have: the exit status tells the caller why
}

// Six characters from [A-Za-z0-9], as mkstemp would choose.
std::string RandomSuffix() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char bytes[6];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    // No entropy source (very old kernels, seccomp): time and pid still differ between files.
    static std::atomic<std::uint64_t> counter{0};
    std::uint64_t x = static_cast<std::uint64_t>(::getpid()) * 0x9E3779B97F4A7C15ull ^
                      static_cast<std::uint64_t>(::time(nullptr)) ^ counter.fetch_add(0x5851F42D);
    for (unsigned char& b : bytes) {
      b = static_cast<unsigned char>(x);
      x = x * 6364136223846793005ull + 1442695040888963407ull;
    }
  }
  std::string out;
  for (unsigned char b : bytes) out += kAlphabet[b % (sizeof kAlphabet - 1)];
  return out;
}

std::string DirName(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ".NAME" + suffix in the directory of `path` (NAME its last component): where the file's
// temporary files and its spare are named.
std::string HiddenSibling(const std::string& path, std::string_view suffix) {
  const auto slash = path.find_last_of('/');
  return path.substr(0, slash == std::string::npos ? 0 : slash + 1) + "." + BaseName(path) +
         std::string(suffix);
}

Status SyncDirectory(const std::string& dir) {
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return Status::FromErrno("open directory '" + dir + "'", errno);
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  // Some filesystems cannot fsync a directory; the rename itself has happened.
  if (rc != 0 && err != EINVAL) return Status::FromErrno("fsync directory '" + dir + "'", err);
  return Status::OK();
}

}  // namespace

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

Result<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path, bool overwrite) {
  if (path.empty()) return Status::InvalidArgument("output path is empty");
  std::string base = BaseName(path);
  if (base.empty() || base == "." || base == "..") {
    return Status::InvalidArgument("output path '" + path + "' does not name a file");
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      return Status::InvalidArgument("output path '" + path + "' is a directory");
    }
    if (!overwrite) {
      return Status::AlreadyExists("'" + path +
                                   "' already exists; refusing to replace it "
                                   "(use `overwrite` to replace it)");
    }
  }
  std::string dir = DirName(path);
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::FromErrno("output directory '" + dir + "'", errno);
  }
  std::unique_ptr<AtomicFile> f(new AtomicFile(path, overwrite));
  const std::string prefix = HiddenSibling(path, ".tmp-");
  // The name is registered for the signal handler before the file exists, and the file is then
  // created with O_EXCL: a signal at any moment finds every temporary file that exists in the
  // registry (mkstemp would create first and leave a window where it does not).
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    std::string candidate = prefix + RandomSuffix();
    int slot = RegisterTemp(candidate);
    fd = ::open(candidate.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      int err = errno;
      UnregisterTemp(slot);
      if (err == EEXIST && attempt < 100) continue;
      return Status::FromErrno("create temporary file in '" + dir + "'", err);
    }
    f->fd_ = fd;
    f->temp_path_ = std::move(candidate);
    f->signal_slot_ = slot;
  }
  // Created 0600; a published table is readable by the serving user too.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  return f;
}

AtomicFile::~AtomicFile() { Abort(); }

Status AtomicFile::WriteAt(std::uint64_t offset, std::span<const std::byte> bytes) {
  if (fd_ < 0) return Status::FailedPrecondition("'" + path_ + "': file is already closed");
  std::lock_guard<std::mutex> lock(write_mu_);
  return WriteAllAt(fd_, offset, bytes, temp_path_);
}

Status AtomicFile::WriteAt(std::uint64_t offset,
                           std::span<const std::span<const std::byte>> pieces) {
  if (fd_ < 0) return Status::FailedPrecondition("'" + path_ + "': file is already closed");
  std::lock_guard<std::mutex> lock(write_mu_);
  return WriteAllAt(fd_, offset, pieces, temp_path_);
}

Status AtomicFile::Append(std::span<const std::byte> bytes) {
  EMBSTORE_RETURN_NOT_OK(WriteAt(append_offset_, bytes));
  append_offset_ += bytes.size();
  return Status::OK();
}

Status AtomicFile::Preallocate(std::uint64_t bytes) {
  if (fd_ < 0) return Status::FailedPrecondition("'" + path_ + "': file is already closed");
  if (bytes <= preallocated_) return Status::OK();
  struct statfs fs;
  if (::fstatfs(fd_, &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
    const std::uint64_t free = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_bsize;
    if (fs.f_blocks > 0 && free < bytes) {  // f_blocks 0: a tmpfs without a size limit
      return Status::FromErrno("reserve " + std::to_string(bytes) + " bytes for '" + temp_path_ +
                                   "' (" + std::to_string(free) + " bytes free)",
                               ENOSPC);
    }
    return Status::OK();
  }
  if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) return Status::OK();  // cannot: fine
    return Status::FromErrno("reserve " + std::to_string(bytes) + " bytes for '" + temp_path_ + "'",
                             err);
  }
  preallocated_ = bytes;
  return Status::OK();
}

std::string AtomicFile::SparePath(const std::string& path) {
  return HiddenSibling(path, ".spare");
}

Result<std::unique_ptr<AtomicFile>> AtomicFile::AdoptSpare(const std::string& path,
                                                          const std::string& spare_path) {
  const std::string what = "spare '" + spare_path + "'";
  // Swapped with a symbolic link, the spare would take the link's name and the link the spare's,
  // leaving the file it names as it was: the new version replaces the link instead, by rename, as
  // every output does.
  struct stat link;
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    return Status::Unavailable("'" + path + "' is a symbolic link, which the new file replaces");
  }
  // O_NONBLOCK: a lease someone else holds on it fails the open instead of waiting for them.
  const int fd = ::open(spare_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound("no " + what);
    if (err == ELOOP) return Status::Unavailable(what + " is a symbolic link, not a file");
    return Status::Unavailable(what + ": " + std::strerror(err));
  }
  std::unique_ptr<AtomicFile> f(new AtomicFile(path, /*overwrite=*/true));
  f->fd_ = fd;
  f->temp_path_ = spare_path;
  f->spare_ = true;
  struct stat st, target;
  if (::fstat(fd, &st) != 0) return Status::Unavailable(what + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Unavailable(what + " is not a regular file");
  if (st.st_nlink != 1) {
    return Status::Unavailable(what + " has " + std::to_string(st.st_nlink) +
                               " names (a spare has one)");
  }
  if (::stat(path.c_str(), &target) == 0 &&
      (target.st_dev != st.st_dev || target.st_ino == st.st_ino)) {
    return Status::Unavailable(what + (target.st_dev != st.st_dev
                                           ? " is on another filesystem than '" + path + "'"
                                           : " is the file '" + path + "' itself"));
  }
  // A lease break signals the holder, by default with SIGIO, whose default action ends the
  // process; SIGURG's is to ignore it. Commit asks the lease itself whether it was broken.
  if (::fcntl(fd, F_SETSIG, SIGURG) != 0 || ::fcntl(fd, F_SETLEASE, F_WRLCK) != 0) {
    const int err = errno;
    return Status::Unavailable(
        err == EAGAIN || err == EBUSY
            ? what + " is open or mapped elsewhere (a reader of an earlier version)"
            : what + ": no write lease on this filesystem (" + std::strerror(err) + ")");
  }
  return f;
}

Status AtomicFile::Truncate(std::uint64_t size) {
  if (fd_ < 0) return Status::FailedPrecondition("'" + path_ + "': file is already closed");
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return Status::FromErrno("truncate '" + temp_path_ + "'", errno);
  }
  return Status::OK();
}

Status AtomicFile::CommitSpare(bool durable) {
  if (durable && ::fdatasync(fd_) != 0) {
    Status st = Status::FromErrno("fsync '" + temp_path_ + "'", errno);
    Abort();
    return st;
  }
  // Nobody opened the spare while it was written (they would be waiting for the lease now): the
  // swap publishes it whole. Whoever opens it from here on waits for the unlock below, and by then
  // it is complete.
  if (::fcntl(fd_, F_GETLEASE) != F_WRLCK) {
    Abort();
    return Status::Unavailable("spare '" + temp_path_ +
                               "' was opened by another process while it was written; it was "
                               "not swapped in");
  }
  if (::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    Abort();
    if (err == EINVAL || err == ENOSYS) {
      return Status::Unavailable("this filesystem cannot swap '" + temp_path_ + "' and '" +
                                 path_ + "' (renameat2 RENAME_EXCHANGE)");
    }
    return Status::FromErrno("swap '" + temp_path_ + "' and '" + path_ + "'", err);
  }
  ::fcntl(fd_, F_SETLEASE, F_UNLCK);
  ::close(fd_);
  fd_ = -1;
  done_ = true;
  return durable ? SyncDirectory(DirName(path_)) : Status::OK();
}

void AtomicFile::KeepReplaced() {
  // Only a file is kept: link() would give a symbolic link at the path a second name, not the
  // file it points to, which is not this one's to move.
  struct stat st;
  if (::lstat(path_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  // The link's own name exists for two system calls; it is registered like a temporary file, so
  // that a signal between them does not leave the replaced file's bytes behind under it.
  const std::string link_path = keep_replaced_ + ".tmp-" + RandomSuffix();
  const int slot = RegisterTemp(link_path);
  if (::link(path_.c_str(), link_path.c_str()) == 0 &&
      ::rename(link_path.c_str(), keep_replaced_.c_str()) != 0) {
    ::unlink(link_path.c_str());
  }
  UnregisterTemp(slot);  // (nothing there, or no links: nothing is kept)
}

Status AtomicFile::Commit(bool durable) {
  if (fd_ < 0 || done_) return Status::FailedPrecondition("'" + path_ + "': already finished");
  if (spare_) return CommitSpare(durable);
  if (preallocated_ > 0) {
    // Blocks reserved past the end (the writer wrote less than it expected) go back: truncating
    // to the file's own size frees what lies beyond it.
    struct stat st;
    if (::fstat(fd_, &st) == 0 && static_cast<std::uint64_t>(st.st_size) < preallocated_ &&
        ::ftruncate(fd_, st.st_size) != 0) {
      Status s = Status::FromErrno("truncate '" + temp_path_ + "'", errno);
      Abort();
      return s;
    }
  }
  if (durable && ::fsync(fd_) != 0) {
    Status st = Status::FromErrno("fsync '" + temp_path_ + "'", errno);
    Abort();
    return st;
  }
  ::close(fd_);
  fd_ = -1;
  if (!keep_replaced_.empty() && overwrite_) KeepReplaced();
  int rc;
  if (overwrite_) {
    rc = ::rename(temp_path_.c_str(), path_.c_str());
  } else {
    rc = ::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
      // The filesystem lacks RENAME_NOREPLACE: link() also refuses to replace, atomically.
      rc = ::link(temp_path_.c_str(), path_.c_str());
      if (rc == 0) ::unlink(temp_path_.c_str());
    }
  }
  if (rc != 0) {
    int err = errno;
    Abort();
    if (err == EEXIST) {
      return Status::AlreadyExists("'" + path_ +
                                   "' appeared while it was being written; "
                                   "refusing to replace it (use `overwrite` to replace it)");
    }
    return Status::FromErrno("rename '" + temp_path_ + "' to '" + path_ + "'", err);
  }
  done_ = true;
  UnregisterTemp(signal_slot_);
  signal_slot_ = -1;
  return durable ? SyncDirectory(DirName(path_)) : Status::OK();
}

void AtomicFile::Abort() {
  if (done_) return;
  if (fd_ >= 0) {
    ::close(fd_);  // (a spare's lease goes with it)
    fd_ = -1;
  }
  if (!temp_path_.empty() && !spare_) ::unlink(temp_path_.c_str());
  UnregisterTemp(signal_slot_);
  signal_slot_ = -1;
  done_ = true;
}

RemoveOnSignal::RemoveOnSignal(const std::string& path, bool directory)
    : slot_(RegisterTemp(path, directory ? kDirectory : kFile)) {}

RemoveOnSignal::~RemoveOnSignal() { UnregisterTemp(slot_); }

void RemoveTempFilesOnSignal() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0 || current.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = RemoveTempsAndReraise;
    sigemptyset(&sa.sa_mask);
    for (int other : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&sa.sa_mask, other);
    sa.sa_flags = SA_RESETHAND;
    sigaction(sig, &sa, nullptr);
  }
}

}  // namespace embstore
