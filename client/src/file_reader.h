// Private: reads row ranges of a local table file into caller memory with pread(2), verifying
// checksum blocks on worker threads while others read. The one implementation of "verify and copy
// a row range of a file": the file source, the server source's local fast path and the CLI's
// export all read through it.
//
// The table's header, checksums and keys come from a store::Table (mapped, validated); its matrix
// is never read through the mapping, so copies leave no table pages resident in the process, and
// a file that shrinks underneath gives a short read (a Corruption error naming the file and the
// rows), never SIGBUS.
#ifndef EMBSTORE_CLIENT_SRC_FILE_READER_H_
#define EMBSTORE_CLIENT_SRC_FILE_READER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "embstore/client/types.h"
#include "embstore/common/status.h"
#include "embstore/store/table.h"

namespace embstore::client::internal {

class FileReader {
 public:
  // Opens `path` for reading and validates it as a table (the same inode for both).
  static Result<std::unique_ptr<FileReader>> Open(const std::string& path);
  // The server's file that `desc` describes, when this host can open the very same file (same
  // device, inode, size, mtime and content id); NotFound saying why not otherwise.
  static Result<std::unique_ptr<FileReader>> OpenServersFile(const TableDesc& desc);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;

  const store::Table& table() const { return *table_; }
  std::shared_ptr<const store::Table> shared_table() const { return table_; }
  const std::string& path() const { return table_->path(); }
  // The file's path and identity (device, inode, size, mtime) when it was opened.
  const ServerFile& file() const { return file_; }

  // Rows [begin, end) into `out` (exactly their size: row_bytes each, or dim * 4 with to_f32).
  // Verifies every block the rows touch when options.verify (a cut block at either end is read
  // whole to check it). Uses options.streams reader threads (0: DefaultStreams()); progress,
  // cancel and timeout are honoured on the calling thread. `name` is what messages call the
  // table.
  Result<LoadStats> CopyRows(std::uint64_t begin, std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options, const std::string& name) const;

 private:
  FileReader() = default;
  // Reads rows [r0, r1), which lie in one run of blocks, into `out` at its position.
  Status ReadPiece(std::uint64_t begin, std::uint64_t r0, std::uint64_t r1,
                   std::span<std::byte> out, const ReadOptions& options,
                   std::vector<std::byte>* scratch) const;
  // pread of exactly `n` bytes at file offset `off`; Corruption if the file ends first.
  Status ReadExactly(std::byte* dst, std::uint64_t n, std::uint64_t off) const;

  int fd_ = -1;
  std::shared_ptr<const store::Table> table_;
  ServerFile file_;
};

}  // namespace embstore::client::internal

#endif  // EMBSTORE_CLIENT_SRC_FILE_READER_H_
