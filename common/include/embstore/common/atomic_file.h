// AtomicFile: write a new file under a temporary name and publish it by rename, so that readers
// only ever see the old file or the complete new one.
//
// Create() creates ".NAME.tmp-XXXXXX" (O_EXCL) in the destination's directory (same filesystem,
// so the final rename is atomic). Commit() fsyncs the data, renames onto the destination and fsyncs the
// directory. Without `overwrite`, an existing destination is AlreadyExists both at Create() and at
// Commit() (no-clobber rename), so a file that appeared meanwhile is never replaced. Abort(), the
// destructor of an uncommitted file, and a failed Commit() remove the temporary file; so does a
// fatal signal, in programs that call RemoveTempFilesOnSignal().
//
// One thread owns an AtomicFile; WriteAt alone may also be called from other threads at the same
// time, for disjoint ranges (parallel downloads writing their pieces).
#ifndef EMBSTORE_COMMON_ATOMIC_FILE_H_
#define EMBSTORE_COMMON_ATOMIC_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "embstore/common/status.h"

namespace embstore {

class AtomicFile {
 public:
  static Result<std::unique_ptr<AtomicFile>> Create(const std::string& path, bool overwrite);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

  // Writes all of `bytes` at `offset` of the temporary file (retrying short writes).
  Status WriteAt(std::uint64_t offset, std::span<const std::byte> bytes);
  // Writes `pieces`, one after another, at `offset` (pwritev: not gathered first).
  Status WriteAt(std::uint64_t offset, std::span<const std::span<const std::byte>> pieces);
  // Appends at the end of what Append has written so far.
  Status Append(std::span<const std::byte> bytes);
  Status Append(std::string_view s) {
    return Append(std::as_bytes(std::span<const char>(s.data(), s.size())));
  }

  // Reserves the file's first `bytes` on disk now (fallocate, FALLOC_FL_KEEP_SIZE: the size the
  // writes give it is unchanged), for a writer that knows how large the file will be. The writes
  // that follow skip the filesystem's block allocation on the way (ext4 writes a table's 480 MB
  // about 30% faster so, as np.save does), and a disk too small fails now, before any data was
  // written, with "No space left on device". Where the filesystem cannot preallocate, this does
  // nothing. Commit() gives back what was reserved beyond the file's final size. On tmpfs, where
  // reserving means zeroing every page that the writes then fill again (0.18 s of a 0.55 s
  // `pull --update` of the seed table in /dev/shm), only the free space is checked.
  Status Preallocate(std::uint64_t bytes);

  // `durable`: fsync the file before the rename and the directory after it, so the file survives
  // a crash of the machine once Commit returns. Without it the rename is still atomic for every
  // reader, but a power loss may lose the file (what np.save and most writers promise).
  Status Commit(bool durable = true);
  void Abort();

  // A spare (docs/CLIENT.md, "Spares"): the existing file `spare_path`, written in place instead
  // of a new temporary file, and swapped with `path` at Commit (renameat2 RENAME_EXCHANGE), so
  // that `path` names what was written and `spare_path` what `path` held. Readers of `path` see
  // the one file or the other, never a mix, as with a new file. The spare is taken only under a
  // write lease (F_SETLEASE), which the kernel grants only while no other open descriptor or
  // mapping of it exists, in this process or any other: nobody reads a file while it is written in
  // place. Whoever opens it afterwards waits until Commit or Abort (at most
  // /proc/sys/fs/lease-break-time seconds); Commit then swaps nothing and fails with Aborted, so
  // the caller writes a new file instead. Unavailable when the spare cannot be taken (why: open
  // elsewhere, not a regular file of one link, the same file as `path`, `path` a symbolic link,
  // no leases on this filesystem); NotFound when there is none. The lease's break signal is
  // SIGURG, which is ignored unless the program handles it. Abort leaves the spare where it is,
  // holding whatever was written into it: a spare's bytes are never trusted, only hashed.
  static Result<std::unique_ptr<AtomicFile>> AdoptSpare(const std::string& path,
                                                        const std::string& spare_path);
  // The spare's name for `path`: ".NAME.spare" in its directory, beside its temporary files.
  static std::string SparePath(const std::string& path);
  // Keeps what `path` holds at Commit, if it is a file, under `spare_path` (replacing what that
  // name held): a hard link made just before the rename, so the replaced file lives on as the
  // spare instead of being freed. Best effort: where links cannot be made, nothing is kept, and a
  // symbolic link at `path` is replaced without being kept.
  void KeepReplacedAs(std::string spare_path) { keep_replaced_ = std::move(spare_path); }
  // Sets the file's size (an adopted spare longer than what was written into it).
  Status Truncate(std::uint64_t size);

 private:
  AtomicFile(std::string path, bool overwrite) : path_(std::move(path)), overwrite_(overwrite) {}
  Status CommitSpare(bool durable);
  void KeepReplaced();

  std::string path_;
  bool overwrite_;
  std::string temp_path_;
  int fd_ = -1;
  std::uint64_t append_offset_ = 0;
  std::uint64_t preallocated_ = 0;
  bool done_ = false;
  int signal_slot_ = -1;  // in the registry RemoveTempFilesOnSignal() reads
  bool spare_ = false;    // AdoptSpare: temp_path_ is the spare, held under a write lease
  std::string keep_replaced_;
  // Concurrent WriteAt calls take turns here: the kernel writes into one file one call at a time
  // anyway (the inode's lock), and a writer waiting there spins on a core while the other copies
  // (tmpfs: a 4 MiB pwritev holds it for about 2 ms). Waiting on this mutex sleeps instead.
  std::mutex write_mu_;
};

// Registers one more path for the handlers of RemoveTempFilesOnSignal() to remove, for as long
// as this object lives (it removes nothing itself): a file (unlink), or a directory (rmdir, after
// every registered file, so a scratch directory registered with the files it holds goes too).
// For scratch space a program deletes on its normal paths anyway. Up to 64 paths are registered
// at a time, AtomicFile's included; beyond that, a path is not.
class RemoveOnSignal {
 public:
  RemoveOnSignal(const std::string& path, bool directory);
  ~RemoveOnSignal();
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;

 private:
  int slot_;
};

// Installs handlers for SIGINT, SIGTERM, SIGHUP and SIGQUIT (those not ignored) that remove every
// AtomicFile's temporary file that exists at that moment (and every path a RemoveOnSignal holds),
// then let the signal take its default
// course (the process dies of it; its exit status says so). For programs such as the CLI, where
// a signal would otherwise leave ".NAME.tmp-XXXXXX" files behind. Not for libraries loaded into
// someone else's process (the Python module leaves signals to Python, whose KeyboardInterrupt
// unwinds through the destructors).
void RemoveTempFilesOnSignal();

// True when `path` names an existing file system entry.
bool PathExists(const std::string& path);

}  // namespace embstore

#endif  // EMBSTORE_COMMON_ATOMIC_FILE_H_
