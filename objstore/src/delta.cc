#include "embstore/objstore/delta.h"

#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include "embstore/objstore/transfer.h"
#include "embstore/store/dtype.h"
#include "embstore/store/table.h"
#include "embstore/store/writer.h"

namespace embstore::objstore {
namespace {

// The object's frame in a new sparse file at `path` (its rows read as zeros), opened as a table:
// its header, checksums and row hashes without its rows.
Result<std::shared_ptr<const store::Table>> OpenFrame(ObjectStore& store, const ObjectUrl& url,
                                                      const ObjectInfo& info,
                                                      const std::string& path) {
  EMBSTORE_ASSIGN_OR_RETURN(TableFrame frame, FetchTableFrame(store, url, info));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::FromErrno("create '" + path + "'", errno);
  const Status st = WriteTableFrame(fd, frame, info.size, "'" + path + "'");
  ::close(fd);
  EMBSTORE_RETURN_NOT_OK(st);
  auto table = store::Table::Open(path);
  if (!table.ok()) {
    return Status(table.status().code(), url.ToString() + " (version " + info.version +
                                             ") is not a valid embstore table: " +
                                             table.status().message());
  }
  return std::move(table).value();
}

}  // namespace

ObjectUrl DeltaUrl(const ObjectUrl& table) {
  ObjectUrl d = table;
  d.key += ".delta";
  return d;
}

Result<DeltaFile> WriteDelta(ObjectStore& store, const ObjectUrl& url, const ObjectInfo& previous,
                             const std::string& new_path, const std::string& frame_path,
                             const std::string& delta_path) {
  DeltaFile out;
  EMBSTORE_ASSIGN_OR_RETURN(auto now, store::Table::Open(new_path));
  if (!now->has_row_hashes()) {
    out.skipped = "the new version stores no row hashes";
    return out;
  }
  auto was_or = OpenFrame(store, url, previous, frame_path);
  if (!was_or.ok()) {
    // Not a table (or one this reader cannot open): there is nothing to take a delta against.
    if (was_or.status().code() != StatusCode::kCorruption &&
        was_or.status().code() != StatusCode::kInvalidArgument) {
      return was_or.status();
    }
    out.skipped = was_or.status().message();
    return out;
  }
  const store::Table& was = **was_or;
  if (!was.has_row_hashes()) {
    out.skipped = "the version it replaces stores no row hashes";
    return out;
  }
  if (was.rows() != now->rows() || was.dim() != now->dim() || was.dtype() != now->dtype()) {
    out.skipped = "the version it replaces is " + std::to_string(was.rows()) + " x " +
                  std::to_string(was.dim()) + " " + std::string(store::DTypeName(was.dtype()));
    return out;
  }
  std::vector<std::uint64_t> ids;
  const std::uint64_t most = static_cast<std::uint64_t>(kMaxDeltaFraction *
                                                        static_cast<double>(now->rows()));
  for (std::uint64_t r = 0; r < now->rows(); ++r) {
    if (now->StoredRowHash(r) == was.StoredRowHash(r)) continue;
    ids.push_back(r);
    if (ids.size() > most) {
      out.skipped = "more than " + std::to_string(most) + " of its " +
                    std::to_string(now->rows()) + " rows changed";
      return out;
    }
  }
  if (ids.empty()) {
    out.skipped = "no row changed";
    return out;
  }
  store::WriterOptions w;
  w.dtype = now->dtype();
  w.dim = now->dim();
  w.row_hashes = true;
  w.overwrite = true;
  w.durable = false;  // a scratch file, uploaded next
  w.expected_rows = ids.size();
  w.delta_of = store::WriterOptions::DeltaOf{store::ContentId(*now), store::ContentId(was)};
  EMBSTORE_ASSIGN_OR_RETURN(auto writer, store::TableWriter::Create(delta_path, w));
  for (std::size_t k = 0; k < ids.size();) {
    std::size_t e = k + 1;
    while (e < ids.size() && ids[e] == ids[e - 1] + 1) ++e;
    EMBSTORE_ASSIGN_OR_RETURN(auto rows, now->RowBytes(ids[k], ids[e - 1] + 1));
    EMBSTORE_RETURN_NOT_OK(writer->AppendRows(rows));
    k = e;
  }
  EMBSTORE_RETURN_NOT_OK(now->CheckIntact());
  EMBSTORE_RETURN_NOT_OK(writer->Finish());
  out.rows = ids.size();
  return out;
}

}  // namespace embstore::objstore
