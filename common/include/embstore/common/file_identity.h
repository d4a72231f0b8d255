// FileIdentity: what tells one file on one host from another, or from a newer version of itself
// (device, inode, size and modification time). The server's catalog notices replaced files by
// it, and a client decides by it whether a server's file is this host's (docs/PROTOCOL.md,
// "Local fast path").
#ifndef EMBSTORE_COMMON_FILE_IDENTITY_H_
#define EMBSTORE_COMMON_FILE_IDENTITY_H_

#include <sys/stat.h>

#include <cstdint>

namespace embstore {

struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

inline FileIdentity IdentityOf(const struct stat& st) {
  FileIdentity id;
  id.device = static_cast<std::uint64_t>(st.st_dev);
  id.inode = static_cast<std::uint64_t>(st.st_ino);
  id.size = static_cast<std::uint64_t>(st.st_size);
  id.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return id;
}

}  // namespace embstore

#endif  // EMBSTORE_COMMON_FILE_IDENTITY_H_
