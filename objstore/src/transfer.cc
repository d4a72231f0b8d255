#include "embstore/objstore/transfer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "embstore/common/atomic_file.h"
#include "embstore/common/write_file.h"
#include "embstore/store/format.h"
#include "embstore/store/table.h"
#include "parts.h"

namespace embstore::objstore {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t LoadLe64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

// `st` with every mention of the temporary file `temp` replaced by `url`: a message about a
// download names what was downloaded.
Status Renamed(const Status& st, const std::string& temp, const std::string& url) {
  std::string msg = st.message();
  for (std::size_t at; (at = msg.find(temp)) != std::string::npos;)
    msg.replace(at, temp.size(), url);
  return Status(st.code(), msg);
}

// The temporary file of a download, created next to `dest` with the object's size reserved: a
// full disk fails here, before any download.
Result<std::unique_ptr<AtomicFile>> CreateDestination(const std::string& dest, std::uint64_t size,
                                                      const ObjectUrl& url, bool overwrite) {
  EMBSTORE_ASSIGN_OR_RETURN(auto file, AtomicFile::Create(dest, overwrite));
  if (size > 0) {
    const int rc = ::posix_fallocate(file->fd(), 0, static_cast<off_t>(size));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
      return Status::FromErrno("allocate " + std::to_string(size) + " bytes for '" +
                                   file->temp_path() + "' (downloading " + url.ToString() + ")",
                               rc);
    }
  }
  return file;
}

// This thread's buffer for a part of `length` bytes, left uninitialized (the part overwrites
// it), kept for the thread's next part.
std::span<std::byte> PartBuffer(std::uint64_t length) {
  thread_local std::unique_ptr<std::byte[]> buffer;
  thread_local std::uint64_t capacity = 0;
  if (capacity < length) {
    buffer = std::make_unique_for_overwrite<std::byte[]>(length);
    capacity = length;
  }
  return {buffer.get(), static_cast<std::size_t>(length)};
}

Status ReplacedDuringDownload(const Status& st, const ObjectUrl& url, const ObjectInfo& info,
                              const std::string& dest) {
  if (st.code() != StatusCode::kFailedPrecondition) return st;
  return Status::FailedPrecondition(url.ToString() + " was replaced during the download (version " +
                                    info.version + "); nothing was written to '" + dest +
                                    "'; run again to fetch the new version");
}

TransferStats Stats(const ObjectInfo& info, Clock::time_point start) {
  TransferStats stats;
  stats.bytes = info.size;
  stats.version = info.version;
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace

Result<TableFrame> FetchTableFrame(ObjectStore& store, const ObjectUrl& url,
                                   const ObjectInfo& info) {
  const std::string what = url.ToString();
  auto bad = [&](const std::string& why) {
    return Status::Corruption(what + " is not a valid embstore table: " + why);
  };
  if (info.size < 8) return bad("it holds " + std::to_string(info.size) + " bytes");
  TableFrame f;
  // Most headers are a few KiB: one read usually brings the whole of it.
  f.head.resize(static_cast<std::size_t>(std::min<std::uint64_t>(info.size, 16 << 10)));
  EMBSTORE_RETURN_NOT_OK(store.ReadRange(url, info.version, 0, f.head));
  f.fetched = f.head.size();
  const std::uint64_t header_len = LoadLe64(f.head.data());
  if (header_len > store::kMaxHeaderBytes || header_len > info.size - 8) {
    return bad("its header length field says " + std::to_string(header_len) + " bytes");
  }
  f.data_offset = 8 + header_len;
  const std::size_t have = f.head.size();
  f.head.resize(static_cast<std::size_t>(f.data_offset));
  if (f.data_offset > have) {
    EMBSTORE_RETURN_NOT_OK(
        store.ReadRange(url, info.version, have, std::span<std::byte>(f.head).subspan(have)));
    f.fetched += f.data_offset - have;
  }
  try {
    auto j = nlohmann::json::parse(reinterpret_cast<const char*>(f.head.data()) + 8,
                                   reinterpret_cast<const char*>(f.head.data()) + f.head.size());
    f.matrix_bytes = j.at("embedding").at("data_offsets").at(1).get<std::uint64_t>();
    if (const auto m = j.find("__metadata__"); m != j.end() && m->is_object()) {
      for (const auto& [k, v] : m->items()) {
        if (v.is_string()) f.metadata.emplace(k, v.get<std::string>());
      }
    }
  } catch (const std::exception& e) {
    return bad(std::string("its header does not name the embedding's extent (") + e.what() + ")");
  }
  if (f.matrix_bytes > info.size - f.data_offset) {
    return bad("its matrix runs past the object's " + std::to_string(info.size) + " bytes");
  }
  f.tail.resize(static_cast<std::size_t>(info.size - f.tail_offset()));
  EMBSTORE_RETURN_NOT_OK(store.ReadRange(url, info.version, f.tail_offset(), f.tail));
  f.fetched += f.tail.size();
  return f;
}

Status WriteTableFrame(int fd, const TableFrame& frame, std::uint64_t size,
                       const std::string& what) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    return Status::FromErrno("size " + what, errno);
  }
  EMBSTORE_RETURN_NOT_OK(WriteAllAt(fd, 0, frame.head, what));
  return WriteAllAt(fd, frame.tail_offset(), frame.tail, what);
}

namespace {

// DownloadTable once the object's frame is here: the frame written into `file` (a new file of
// the object's size), then the rows, each part checked, then the keys; `file` committed.
Result<TransferStats> DownloadRows(ObjectStore& store, const ObjectUrl& url,
                                   const ObjectInfo& info, const TableFrame* frame,
                                   AtomicFile* file, const std::string& dest,
                                   const TransferOptions& o, Clock::time_point start) {
  const std::string& temp = file->temp_path();
  EMBSTORE_RETURN_NOT_OK(file->WriteAt(0, frame->head));
  EMBSTORE_RETURN_NOT_OK(file->WriteAt(frame->tail_offset(), frame->tail));
  // The frame in place, the file is a table whose rows are still zeros: store::Table reads the
  // header, the checksums and the keys from it, and checks the rows as they come.
  auto opened = store::Table::Open(temp);
  if (!opened.ok()) {
    return Status(opened.status().code(),
                  url.ToString() + " is not a valid embstore table: " +
                      Renamed(opened.status(), temp, url.ToString()).message());
  }
  const store::Table& table = **opened;
  const std::uint64_t block_bytes = table.block_rows() * table.row_bytes();
  const std::uint64_t blocks = table.num_blocks();
  // Parts of whole checksum blocks, so that each is checked on its own.
  const std::uint64_t per_part = std::max<std::uint64_t>(
      1, std::max<std::uint64_t>(1 << 20, o.part_bytes) / std::max<std::uint64_t>(1, block_bytes));
  const std::uint64_t count = (blocks + per_part - 1) / per_part;
  std::atomic<std::uint64_t> done{frame->head.size() + frame->tail.size()};
  Status st = internal::RunParts(
      count, o.parallel, info.size, done, o.progress, [&](std::uint64_t i) -> Status {
        const std::uint64_t first_block = i * per_part;
        const std::uint64_t end_block = std::min(blocks, first_block + per_part);
        const std::uint64_t first_row = first_block * table.block_rows();
        const std::uint64_t end_row = std::min(table.rows(), end_block * table.block_rows());
        const std::uint64_t off = table.data_offset() + first_row * table.row_bytes();
        const std::span<std::byte> buf = PartBuffer((end_row - first_row) * table.row_bytes());
        EMBSTORE_RETURN_NOT_OK(store.ReadRange(url, info.version, off, buf));
        if (o.verify) {
          for (std::uint64_t b = first_block; b < end_block; ++b) {
            const std::uint64_t at = (b - first_block) * block_bytes;
            const std::uint64_t len = std::min<std::uint64_t>(block_bytes, buf.size() - at);
            Status c = table.CheckBlock(b, std::span<const std::byte>(buf).subspan(at, len));
            if (!c.ok()) {
              return Status(c.code(), url.ToString() + " failed verification: " +
                                          Renamed(c, temp, url.ToString()).message());
            }
          }
        }
        EMBSTORE_RETURN_NOT_OK(file->WriteAt(off, buf));
        done += buf.size();
        return Status::OK();
      });
  if (!st.ok()) return ReplacedDuringDownload(st, url, info, dest);
  if (o.verify) {
    Status keys = table.VerifyKeys();
    if (keys.ok()) keys = table.CheckIntact();
    if (!keys.ok()) {
      return Status(keys.code(), url.ToString() + " failed verification: " +
                                     Renamed(keys, temp, url.ToString()).message());
    }
  }
  opened->reset();
  EMBSTORE_RETURN_NOT_OK(file->Commit(o.durable));
  return Stats(info, start);
}

}  // namespace

Result<TransferStats> DownloadTable(ObjectStore& store, const ObjectUrl& url,
                                    const std::string& dest, const TransferOptions& o) {
  const auto start = Clock::now();
  EMBSTORE_ASSIGN_OR_RETURN(ObjectInfo info, store.Stat(url));
  EMBSTORE_ASSIGN_OR_RETURN(auto file, CreateDestination(dest, info.size, url, o.overwrite));
  auto frame = FetchTableFrame(store, url, info);
  if (!frame.ok()) return ReplacedDuringDownload(frame.status(), url, info, dest);
  return DownloadRows(store, url, info, &*frame, file.get(), dest, o, start);
}

Result<TransferStats> DownloadTable(ObjectStore& store, const ObjectUrl& url,
                                    const ObjectInfo& info, const TableFrame& frame,
                                    const std::string& dest, const TransferOptions& o) {
  const auto start = Clock::now();
  EMBSTORE_ASSIGN_OR_RETURN(auto file, CreateDestination(dest, info.size, url, o.overwrite));
  auto got = DownloadRows(store, url, info, &frame, file.get(), dest, o, start);
  if (got.ok()) got->bytes -= frame.head.size() + frame.tail.size();  // fetched by the caller
  return got;
}

Result<TransferStats> DownloadObject(ObjectStore& store, const ObjectUrl& url,
                                     const std::string& dest, const TransferOptions& o) {
  const auto start = Clock::now();
  EMBSTORE_ASSIGN_OR_RETURN(ObjectInfo info, store.Stat(url));
  EMBSTORE_ASSIGN_OR_RETURN(auto file, CreateDestination(dest, info.size, url, o.overwrite));
  const std::uint64_t size = info.size;
  const std::uint64_t part = std::max<std::uint64_t>(1 << 20, o.part_bytes);
  const std::uint64_t count = (size + part - 1) / part;
  std::atomic<std::uint64_t> done{0};
  Status st =
      internal::RunParts(count, o.parallel, size, done, o.progress, [&](std::uint64_t i) -> Status {
        const std::uint64_t off = i * part;
        const std::span<std::byte> buf = PartBuffer(std::min(part, size - off));
        EMBSTORE_RETURN_NOT_OK(store.ReadRange(url, info.version, off, buf));
        EMBSTORE_RETURN_NOT_OK(file->WriteAt(off, buf));
        done += buf.size();
        return Status::OK();
      });
  if (!st.ok()) return ReplacedDuringDownload(st, url, info, dest);
  EMBSTORE_RETURN_NOT_OK(file->Commit());
  return Stats(info, start);
}

Result<TransferStats> UploadFile(ObjectStore& store, const std::string& path, const ObjectUrl& url,
                                 const TransferOptions& o) {
  const auto start = Clock::now();
  struct stat sb;
  if (::stat(path.c_str(), &sb) != 0) return Status::FromErrno("stat '" + path + "'", errno);
  TransferStats stats;
  stats.bytes = static_cast<std::uint64_t>(sb.st_size);
  EMBSTORE_ASSIGN_OR_RETURN(stats.version, store.Upload(path, url, o));
  stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace embstore::objstore
