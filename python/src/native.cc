// embstore._native: the Python binding of embstore::client and embstore::store.
//
// Loads run with the GIL released; the calling thread wakes about five times a second to take the
// GIL, check for signals (so Ctrl-C interrupts a long load) and call the progress callback.
// Errors surface as the exception classes of embstore.errors, carrying embstore's message (which
// names the server, table, file or row). Buffers are filled in place: the Python side allocates
// them (64-byte aligned, writable) and passes them in.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <sys/mman.h>
#include <unistd.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embstore/client/open_source.h"
#include "embstore/client/row_source.h"
#include "embstore/client/sharded.h"
#include "embstore/client/update.h"
#include "embstore/common/atomic_file.h"
#include "embstore/common/option_names.h"
#include "embstore/convert/convert.h"
#include "embstore/objstore/destination.h"
#include "embstore/store/dtype.h"
#include "embstore/store/format.h"
#include "embstore/store/names.h"
#include "embstore/store/table.h"
#include "embstore/store/writer.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace embstore::python {
namespace {

// A library message in Python's terms: the C++ option names it quotes in backquotes become the
// keyword arguments that set them (`tls.cert_file` is tls_cert=).
std::string InKeywordTerms(std::string_view message) {
  static constexpr OptionName kKeywords[] = {
      {"tls.cert_file", "tls_cert="},   {"tls.key_file", "tls_key="},
      {"overwrite", "force=True"},      {"on_overflow", "on_overflow"},
      {"on_duplicate_key", "on_duplicate_key"}, {"delimiter", "delimiter="},
      {"comments", "comments="},        {"metadata", "metadata="},
      {"format", "format="}};
  return InFrontEndTerms(message, kKeywords);
}

// Raises the embstore.errors class for `st` (NotFound, Corruption, ...).
[[noreturn]] void Raise(const Status& st) {
  const char* cls = "EmbstoreError";
  switch (st.code()) {
    case StatusCode::kNotFound:
      cls = "NotFoundError";
      break;
    case StatusCode::kInvalidArgument:
      cls = "InvalidArgumentError";
      break;
    case StatusCode::kOutOfRange:
      cls = "OutOfRangeError";
      break;
    case StatusCode::kCorruption:
      cls = "CorruptionError";
      break;
    case StatusCode::kUnavailable:
      cls = "UnavailableError";
      break;
    case StatusCode::kDeadlineExceeded:
      cls = "DeadlineExceededError";
      break;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      cls = "PermissionError_";
      break;
    case StatusCode::kAlreadyExists:
      cls = "AlreadyExistsError";
      break;
    case StatusCode::kFailedPrecondition:
      cls = "FailedPreconditionError";
      break;
    case StatusCode::kCancelled:
      cls = "CancelledError";
      break;
    default:
      break;
  }
  nb::object errors = nb::module_::import_("embstore.errors");
  nb::object type = errors.attr(cls);
  // Messages may quote bytes from hostile files; never let a bad byte turn the error into a
  // UnicodeDecodeError.
  const std::string message = InKeywordTerms(st.message());
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "backslashreplace");
  if (text == nullptr) throw nb::python_error();
  PyErr_SetObject(type.ptr(), text);
  Py_DECREF(text);
  throw nb::python_error();
}

template <typename T>
T Unwrap(Result<T>&& r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

void Check(const Status& st) {
  if (!st.ok()) Raise(st);
}

// Runs `fn` (returning Result<T>) with the GIL released and returns its value or raises.
template <typename Fn>
auto WithoutGil(Fn&& fn) {
  std::optional<decltype(fn())> r;
  {
    nb::gil_scoped_release nogil;
    r.emplace(fn());
  }
  return Unwrap(std::move(*r));
}

// A writable, C-contiguous buffer from Python (numpy array, memoryview of a torch tensor...).
using OutArray = nb::ndarray<nb::device::cpu, nb::c_contig>;

std::span<std::byte> Bytes(OutArray& a) {
  if (a.size() > 0 && a.data() == nullptr) {
    throw nb::value_error("output buffer has no data");
  }
  return {static_cast<std::byte*>(a.data()), a.nbytes()};
}

nb::dict DescToDict(const client::TableDesc& d) {
  nb::dict out;
  out["name"] = d.name;
  out["rows"] = d.rows;
  out["dim"] = d.dim;
  out["dtype"] = std::string(store::DTypeName(d.dtype));
  out["row_bytes"] = d.row_bytes;
  out["content_id"] = d.content_id;
  out["generation"] = d.generation;
  out["block_rows"] = d.block_rows;
  out["has_keys"] = d.has_keys;
  out["key_bytes"] = d.key_bytes;
  out["format_version"] = d.format_version;
  out["metadata"] = d.metadata;
  if (d.file) out["path"] = d.file->path;
  return out;
}

// The progress callback of a load: takes the GIL, checks for signals and calls `progress` (a
// Python callable or None). Sets *interrupted when a signal or a Python error stops the load.
// `progress` is held by handle, so copies of the callback (made on threads without the GIL) touch
// no reference counts; the caller keeps it alive for the load.
std::function<bool(std::uint64_t, std::uint64_t)> ProgressCallback(bool* interrupted_out,
                                                                   nb::handle progress) {
  return [interrupted_out, progress](std::uint64_t done, std::uint64_t total) {
    bool& interrupted = *interrupted_out;
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) {
      interrupted = true;
      return false;
    }
    if (!progress.is_none()) {
      try {
        nb::object keep_going = progress(done, total);
        if (!keep_going.is_none() && !nb::cast<bool>(keep_going)) return false;
      } catch (nb::python_error& e) {
        e.restore();
        interrupted = true;
        return false;
      }
    }
    return true;
  };
}

nb::dict StatsToDict(const client::LoadStats& s) {
  nb::dict d;
  d["rows"] = s.rows;
  d["bytes"] = s.bytes;
  d["wire_bytes"] = s.wire_bytes;
  d["seconds"] = s.seconds;
  d["streams"] = s.streams;
  d["resumes"] = s.resumes;
  d["bad_chunks"] = s.bad_chunks;
  d["local"] = s.local;
  d["content_id"] = s.content_id;
  return d;
}

// Connection settings for servers: built once in Python (embstore._core) and shared by every
// source of a location.
struct PyConnectOptions {
  client::ConnectOptions o;
};

// Seconds from Python as milliseconds: any positive time is at least 1 ms (0 means none).
std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(
      seconds > 0 ? std::max<long long>(1, static_cast<long long>(std::ceil(seconds * 1000)))
                  : 0);
}

// How one read goes: the plain fields of client::ReadOptions (callbacks are per call).
struct PyReadOptions {
  int streams = 0;
  double timeout = 0;  // seconds; 0: none
  bool verify = true;
  bool to_f32 = false;
  std::uint64_t chunk_bytes = 0;
  int max_attempts = 8;

  client::ReadOptions ToNative() const {
    client::ReadOptions r;
    r.streams = streams;
    if (timeout > 0) r.timeout = Millis(timeout);
    r.verify = verify;
    r.to_f32 = to_f32;
    r.chunk_bytes = chunk_bytes;
    r.max_attempts = max_attempts;
    return r;
  }
};

// A copy's row hashes begun before its source is opened (client::CopyHashes), so that hashing
// overlaps connecting and describing; holds the array until UpdateInto takes the hashes over.
class PyCopyHashes {
 public:
  PyCopyHashes(OutArray rows, std::size_t row_bytes)
      : rows_(rows), hashes_(client::CopyHashes::Start(Bytes(rows_), row_bytes)) {}

  std::unique_ptr<client::CopyHashes> Take() { return std::move(hashes_); }

 private:
  OutArray rows_;  // a reference to the array, kept while its bytes are hashed
  std::unique_ptr<client::CopyHashes> hashes_;
};

// One table at any location (client::OpenSource, the resolver): described once, then read chunk
// by chunk into buffers Python owns, with the GIL released.
class PySource {
 public:
  static PySource Open(const std::string& location, const std::optional<std::string>& table,
                       const PyConnectOptions& c, bool allow_local, double open_timeout) {
    // An empty name is a bad name, not "no name" as it is to SourceOptions.
    if (table && table->empty()) Check(store::ValidateTableName(*table));
    client::SourceOptions o;
    o.table = table.value_or("");
    o.connect = c.o;
    o.allow_local = allow_local;
    o.open_timeout = Millis(open_timeout);
    return PySource(WithoutGil([&] { return client::OpenSource(location, o); }));
  }

  std::string kind() const { return std::string(source_->kind()); }
  std::string location() const { return source_->location(); }
  // The table file this source reads, when it is a local file (what zero-copy views map).
  std::optional<std::string> file_path() const {
    if (source_->kind() != "file") return std::nullopt;
    return source_->local_table()->path();
  }
  nb::dict desc() const { return DescToDict(source_->desc()); }

  // Rows [begin, end) into `out` (C-contiguous, writable, exactly their bytes). Progress and
  // signal checks run on this thread with the GIL held; a pending KeyboardInterrupt cancels the
  // read and is re-raised.
  nb::dict ReadInto(std::uint64_t begin, std::uint64_t end, OutArray out,
                    const PyReadOptions& options, nb::object progress) {
    client::ReadOptions o = options.ToNative();
    bool interrupted = false;
    o.progress = ProgressCallback(&interrupted, progress);
    std::span<std::byte> dst = Bytes(out);
    std::optional<Result<client::LoadStats>> r;
    {
      nb::gil_scoped_release nogil;
      r.emplace(source_->CopyRows(begin, end, dst, o));
    }
    if (interrupted && PyErr_Occurred()) throw nb::python_error();
    return StatsToDict(Unwrap(std::move(*r)));
  }

  // The rows of `keys` into `out` in request order; returns the indices of missing keys.
  std::vector<std::uint32_t> CopyKeys(const std::vector<std::string>& keys, OutArray out,
                                      const PyReadOptions& options) {
    client::ReadOptions o = options.ToNative();
    std::span<std::byte> dst = Bytes(out);
    return WithoutGil([&]() -> Result<std::vector<std::uint32_t>> {
      EMBSTORE_ASSIGN_OR_RETURN(auto r, source_->CopyKeys(keys, dst, o));
      return std::move(r.missing);
    });
  }

  // Brings `out` (the table's rows in its own dtype, an earlier version) up to this source's
  // version by the rows that differ (client::UpdateInPlace); `out` is untouched on error.
  // `started`: the copy's hashes, begun before the source was opened (used when they are of
  // `out`'s bytes at the table's row size).
  nb::dict UpdateInto(OutArray out, const PyReadOptions& options, PyCopyHashes* started) {
    client::ReadOptions o = options.ToNative();
    std::span<std::byte> dst = Bytes(out);
    std::unique_ptr<client::CopyHashes> hashes = started ? started->Take() : nullptr;
    const client::UpdateStats s = WithoutGil(
        [&] { return client::UpdateInPlace(*source_, dst, o, std::move(hashes)); });
    nb::dict d;
    d["up_to_date"] = s.up_to_date;
    d["needs_full"] = s.needs_full;
    d["full_reason"] = s.full_reason;
    d["by_rows"] = s.by_rows;
    d["rows"] = s.rows;
    d["changed_rows"] = s.changed_rows;
    d["refetched_blocks"] = s.refetched_blocks;
    d["delta_rows"] = s.delta_rows;
    d["digest_bytes"] = s.digest_bytes;
    d["row_bytes_moved"] = s.row_bytes_moved;
    d["moved_bytes"] = s.moved();
    d["table_bytes"] = s.table_bytes;
    d["content_id"] = s.content_id;
    d["seconds"] = s.seconds;
    d["digest_seconds"] = s.digest_seconds;
    d["fetch_seconds"] = s.fetch_seconds;
    d["check_seconds"] = s.check_seconds;
    return d;
  }

  std::vector<std::string> Keys(std::uint64_t begin, std::optional<std::uint64_t> end) {
    return WithoutGil([&] { return source_->Keys(begin, end.value_or(source_->desc().rows)); });
  }

 private:
  explicit PySource(std::unique_ptr<client::RowSource> s) : source_(std::move(s)) {}
  std::shared_ptr<client::RowSource> source_;
};

// A local table file mapped read-only, for zero-copy views (copy=False, torch.from_file).
class PyTable {
 public:
  explicit PyTable(const std::string& path) {
    table_ = WithoutGil([&] { return store::Table::Open(path); });
  }

  std::uint64_t rows() const { return table_->rows(); }
  std::uint64_t dim() const { return table_->dim(); }
  std::string dtype() const { return std::string(store::DTypeName(table_->dtype())); }
  std::string path() const { return table_->path(); }
  std::uint64_t data_offset() const { return table_->data_offset(); }

  // Checks the checksum blocks of rows [begin, end) (each block once for the life of the
  // mapping), with the GIL released; raises CorruptionError naming the block.
  void VerifyRows(std::uint64_t begin, std::uint64_t end) const {
    WithoutGil([&]() -> Result<bool> {
      EMBSTORE_RETURN_NOT_OK(table_->VerifyRowsOnce(begin, end));
      return true;
    });
  }

  // The whole matrix as a read-only uint8 array [rows, row_bytes] over the mapping (zero copy).
  // The array keeps the mapping alive.
  nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<2>> View() const {
    auto* holder = new std::shared_ptr<const store::Table>(table_);
    nb::capsule owner(holder, [](void* p) noexcept {
      delete static_cast<std::shared_ptr<const store::Table>*>(p);
    });
    auto bytes = *table_->RowBytes(0, table_->rows());
    std::size_t shape[2] = {static_cast<std::size_t>(table_->rows()), table_->row_bytes()};
    return nb::ndarray<nb::numpy, const std::uint8_t, nb::ndim<2>>(
        reinterpret_cast<const std::uint8_t*>(bytes.data()), 2, shape, owner);
  }

 private:
  std::shared_ptr<const store::Table> table_;
};

// Any array's buffer, when it is C-contiguous (nullopt otherwise: strides are left alone).
using AnyArray = nb::ndarray<nb::ro, nb::device::cpu>;
std::optional<std::pair<const void*, std::size_t>> ContiguousBytes(const AnyArray& a) {
  std::int64_t expect = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return std::nullopt;
    expect *= static_cast<std::int64_t>(a.shape(i));
  }
  return std::make_pair(a.data(), a.nbytes());
}

store::OverflowPolicy ParseOverflow(const std::string& s) {
  if (s == "error") return store::OverflowPolicy::kError;
  if (s == "inf") return store::OverflowPolicy::kInfinity;
  Raise(Status::InvalidArgument("`on_overflow` must be 'error' or 'inf', not '" + s + "'"));
}

// The float nearest `d` by round-to-odd: truncated to f32, with the last bit set when that lost
// anything. Rounding that to F16 or BF16 (which keep at least two bits fewer) gives the correctly
// rounded result of `d` itself: no double rounding.
float RoundToOddF32(double d) {
  float f = static_cast<float>(d);
  if (std::isnan(d) || static_cast<double>(f) == d) return f;
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) {
    f = std::nextafter(f, 0.0f);  // truncate toward zero (an infinity becomes FLT_MAX)
  }
  std::uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A new table written chunk by chunk from Python (embstore.save and the tf/torch writers): rows
// arrive as contiguous buffers of f32, f16, bf16 or f64 and are rounded once to the table's
// dtype; keys arrive with their rows. The table appears at `dest` (a path, s3:// or hdfs://)
// whole or not at all when finish() returns; abort(), an error or the writer's end without
// finish() leave nothing behind. Memory: the chunk being converted, plus the keys.
class PyWriter {
 public:
  PyWriter(const std::string& dest, std::uint64_t dim, const std::string& dtype, bool with_keys,
           bool overwrite, const std::map<std::string, std::string>& metadata,
           const std::string& on_overflow, std::uint64_t block_rows, bool durable,
           bool row_hashes, std::uint64_t expected_rows) {
    auto t = store::ParseDType(dtype);
    if (!t) Raise(Status::InvalidArgument("dtype must be f32, f16 or bf16, not '" + dtype + "'"));
    overflow_ = ParseOverflow(on_overflow);
    store::WriterOptions o;
    o.dtype = *t;
    o.dim = dim;
    o.with_keys = with_keys;
    o.overwrite = overwrite;
    o.block_rows = block_rows;
    o.durable = durable;
    o.row_hashes = row_hashes;
    o.expected_rows = expected_rows;  // the space is reserved up front (a full disk fails now)
    o.metadata = metadata;
    dest_ = WithoutGil([&] { return objstore::TableDestination::Open(dest, overwrite, "save"); });
    writer_ = WithoutGil([&] { return store::TableWriter::Create(dest_->local_path(), o); });
  }

  std::uint64_t rows() const { return writer_ ? writer_->rows() : 0; }

  // Appends rows given as `kind` ("f32", "f16", "bf16" or "f64") in `values` (C-contiguous, any
  // shape holding whole rows), with their keys when the table has keys.
  void Append(const AnyArray& values, const std::string& kind,
              const std::optional<std::vector<std::string>>& keys) {
    if (!writer_) Raise(Status::FailedPrecondition("table '" + dest_->dest() + "': writer is closed"));
    auto bytes = ContiguousBytes(values);
    if (!bytes) Raise(Status::InvalidArgument("rows appended to '" + dest_->dest() + "' are not C-contiguous"));
    const std::size_t esize = kind == "f64" ? 8 : kind == "f32" ? 4 : 2;
    if (kind != "f64" && kind != "f32" && kind != "f16" && kind != "bf16") {
      Raise(Status::InvalidArgument("unknown element kind '" + kind + "'"));
    }
    const std::size_t n = bytes->second / esize;
    const std::uint64_t dim = writer_->dim();
    if (n % dim != 0) {
      Raise(Status::InvalidArgument("table '" + dest_->dest() + "': " + std::to_string(n) +
                                    " values are not whole rows of " + std::to_string(dim)));
    }
    if (keys && keys->size() != n / dim) {
      Raise(Status::InvalidArgument("table '" + dest_->dest() + "': " +
                                    std::to_string(keys->size()) + " keys for " +
                                    std::to_string(n / dim) + " rows"));
    }
    const auto* src = static_cast<const std::byte*>(bytes->first);
    const std::uint64_t first_row = writer_->rows();
    Status st = [&]() -> Status {
      nb::gil_scoped_release nogil;
      return AppendEncoded(src, n, kind, first_row, keys);
    }();
    if (!st.ok()) {
      writer_.reset();
      Raise(InDestTerms(st));
    }
  }

  nb::dict Finish(nb::object progress) {
    if (!writer_) Raise(Status::FailedPrecondition("table '" + dest_->dest() + "': writer is closed"));
    const std::uint64_t rows = writer_->rows(), dim = writer_->dim();
    const std::string dtype(store::DTypeName(writer_->dtype()));
    bool interrupted = false;
    objstore::TransferOptions t;
    t.progress = ProgressCallback(&interrupted, progress);
    std::optional<Status> st;
    std::optional<Result<objstore::TransferStats>> up;
    {
      nb::gil_scoped_release nogil;
      st = writer_->Finish();
      if (st->ok()) up.emplace(dest_->Publish(t));
    }
    writer_.reset();
    if (!st->ok()) Raise(InDestTerms(*st));
    if (interrupted && PyErr_Occurred()) throw nb::python_error();
    if (!up->ok()) Raise(up->status());
    nb::dict d;
    d["path"] = dest_->dest();
    d["rows"] = rows;
    d["dim"] = dim;
    d["dtype"] = dtype;
    d["uploaded_bytes"] = (*up)->bytes;
    if (dest_->is_object()) {
      // The rows that changed since the version this one replaced, uploaded beside it.
      d["delta_rows"] = dest_->delta().rows;
      d["delta_bytes"] = dest_->delta().bytes;
      d["delta_skipped"] = dest_->delta().skipped;
    }
    return d;
  }

  void Abort() {
    if (writer_) writer_->Abort();
    writer_.reset();
  }

 private:
  // Error messages name the destination the caller gave, not the scratch file of an upload.
  Status InDestTerms(const Status& st) const {
    if (!dest_->is_object()) return st;
    std::string m = st.message();
    const std::string& local = dest_->local_path();
    for (std::size_t at = m.find(local); at != std::string::npos; at = m.find(local, at)) {
      m.replace(at, local.size(), dest_->dest());
      at += dest_->dest().size();
    }
    return Status(st.code(), m);
  }

  Status AppendEncoded(const std::byte* src, std::size_t n, const std::string& kind,
                       std::uint64_t first_row,
                       const std::optional<std::vector<std::string>>& keys) {
    const store::DType target = writer_->dtype();
    const std::uint64_t dim = writer_->dim();
    std::span<const std::byte> encoded;
    if (store::ParseDType(kind) == target) {
      encoded = {src, n * store::DTypeSize(target)};  // already the table's dtype: no rounding
    } else {
      floats_.resize(n);
      if (kind == "f64") {
        const auto* d = reinterpret_cast<const double*>(src);
        bool overflowed = false;
        std::size_t bad = 0;
        for (std::size_t i = 0; i < n; ++i) {
          if (target == store::DType::kF32) {
            floats_[i] = static_cast<float>(d[i]);
            if (std::isinf(floats_[i]) && std::isfinite(d[i]) && !overflowed) {
              overflowed = true;
              bad = i;
            }
          } else {
            floats_[i] = RoundToOddF32(d[i]);
          }
        }
        if (overflowed && overflow_ == store::OverflowPolicy::kError) {
          return Status::OutOfRange(
              "table '" + writer_->path() + "': value " + std::to_string(d[bad]) + " at row " +
              std::to_string(first_row + bad / dim) + ", column " + std::to_string(bad % dim) +
              " is too large for f32 (`on_overflow` inf stores it as infinity)");
        }
      } else if (kind == "f32") {
        std::memcpy(floats_.data(), src, n * 4);
      } else {
        store::ConvertToF32(kind == "f16" ? store::DType::kF16 : store::DType::kBF16,
                            {src, n * 2}, floats_);
      }
      if (target == store::DType::kF32) {
        encoded = std::as_bytes(std::span<const float>(floats_));
      } else {
        encoded_.resize(n * 2);
        if (auto bad = store::ConvertFromF32(target, floats_, encoded_, overflow_)) {
          std::string value = kind == "f64"
                                  ? std::to_string(reinterpret_cast<const double*>(src)[*bad])
                                  : std::to_string(floats_[*bad]);
          return Status::OutOfRange("table '" + writer_->path() + "': value " + value +
                                    " at row " + std::to_string(first_row + *bad / dim) +
                                    ", column " + std::to_string(*bad % dim) + " is too large for " +
                                    std::string(store::DTypeName(target)) +
                                    " (`on_overflow` inf stores it as infinity)");
        }
        encoded = encoded_;
      }
    }
    if (!keys) return writer_->AppendRows(encoded);
    std::vector<std::string_view> views(keys->begin(), keys->end());
    EMBSTORE_ASSIGN_OR_RETURN(auto r, writer_->AppendKeyedRows(encoded, views));
    if (r.refused) {
      const std::string& k = (*keys)[r.refused->index];
      return Status::AlreadyExists("table '" + writer_->path() + "': key '" + k + "' of row " +
                                   std::to_string(first_row + r.refused->index) +
                                   " repeats row " + std::to_string(r.refused->first_row) +
                                   "; keys must be unique");
    }
    return Status::OK();
  }

  std::unique_ptr<objstore::TableDestination> dest_;
  std::unique_ptr<store::TableWriter> writer_;
  store::OverflowPolicy overflow_ = store::OverflowPolicy::kError;
  std::vector<float> floats_;
  std::vector<std::byte> encoded_;
};

// A shard manifest (docs/DEPLOY.md) for shards just written, checked by the reader's own rules
// and published atomically at `path` (a local file; refused when it exists without `overwrite`).
void WriteShardManifest(const std::string& path, const std::string& table, std::uint64_t rows,
                        std::uint64_t dim, const std::string& dtype,
                        const std::vector<std::tuple<std::uint64_t, std::uint64_t, std::string,
                                                     std::string>>& shards,
                        bool overwrite) {
  client::ShardManifest m;
  m.origin = path;
  m.table = table;
  m.rows = rows;
  m.dim = dim;
  auto t = store::ParseDType(dtype);
  if (!t) Raise(Status::InvalidArgument("dtype must be F32, F16 or BF16, not '" + dtype + "'"));
  m.dtype = *t;
  for (const auto& [begin, end, target, name] : shards) {
    client::ShardSpec spec;
    spec.begin = begin;
    spec.end = end;
    spec.target = target;
    spec.table = name;
    m.shards.push_back(std::move(spec));
  }
  const std::string text = client::FormatShardManifest(m);
  WithoutGil([&]() -> Result<bool> {
    EMBSTORE_RETURN_NOT_OK(client::ParseShardManifest(text, path).status());
    EMBSTORE_ASSIGN_OR_RETURN(auto file, AtomicFile::Create(path, overwrite));
    EMBSTORE_RETURN_NOT_OK(file->Append(text));
    EMBSTORE_RETURN_NOT_OK(file->Commit());
    return true;
  });
}

// embstore.convert: convert::Convert to any destination, with progress and Ctrl-C.
nb::dict Convert(const std::string& input, const std::string& output,
                 const std::string& format, const std::string& dtype,
                 const std::optional<std::string>& delimiter, const std::string& comments,
                 std::uint64_t skip_rows, unsigned threads, bool overwrite,
                 const std::string& on_overflow, const std::string& on_duplicate_key,
                 const std::map<std::string, std::string>& metadata, nb::object progress) {
  convert::ConvertOptions o;
  auto f = convert::ParseInputFormat(format);
  if (!f) Raise(Status::InvalidArgument("`format` must be auto, matrix, word2vec, glove or word2vec-binary, not '" + format + "'"));
  o.format = *f;
  auto t = store::ParseDType(dtype);
  if (!t) Raise(Status::InvalidArgument("dtype must be f32, f16 or bf16, not '" + dtype + "'"));
  o.dtype = *t;
  if (delimiter) {
    if (delimiter->size() != 1) {
      Raise(Status::InvalidArgument("`delimiter` must be one character, not '" + *delimiter + "'"));
    }
    o.delimiter = (*delimiter)[0];
  }
  o.comments = comments;
  o.skip_rows = skip_rows;
  o.threads = threads;
  o.overwrite = overwrite;
  o.on_overflow = ParseOverflow(on_overflow);
  auto d = convert::ParseDuplicateKeyPolicy(on_duplicate_key);
  if (!d) Raise(Status::InvalidArgument("`on_duplicate_key` must be error, first or last, not '" + on_duplicate_key + "'"));
  o.on_duplicate_key = *d;
  o.metadata = metadata;
  bool interrupted = false;
  o.progress = ProgressCallback(&interrupted, progress);
  std::optional<Result<convert::ConvertStats>> r;
  {
    nb::gil_scoped_release nogil;
    r.emplace([&]() -> Result<convert::ConvertStats> {
      EMBSTORE_ASSIGN_OR_RETURN(auto dest,
                                objstore::TableDestination::Open(output, overwrite, "convert"));
      EMBSTORE_ASSIGN_OR_RETURN(auto stats, convert::Convert(input, dest->local_path(), o));
      EMBSTORE_RETURN_NOT_OK(dest->Publish().status());
      return stats;
    }());
  }
  if (interrupted && PyErr_Occurred()) throw nb::python_error();
  const convert::ConvertStats s = Unwrap(std::move(*r));
  nb::dict out;
  out["path"] = output;
  out["format"] = std::string(convert::InputFormatName(s.format));
  out["format_note"] = s.format_note;
  out["rows"] = s.rows;
  out["dim"] = s.dim;
  out["dtype"] = std::string(store::DTypeName(s.dtype));
  out["input_bytes"] = s.input_bytes;
  out["output_bytes"] = s.output_bytes;
  out["duplicate_keys"] = s.duplicate_keys;
  out["seconds"] = s.seconds;
  out["threads"] = s.threads;
  out["gzip"] = s.gzip;
  out["kernel"] = s.kernel;
  return out;
}

// Zero pages, for the TF1 loader (embstore/tf/_graph.py).
//
// TensorFlow's graph optimizer folds a large zeros initializer into a constant that the session
// keeps for its life, and a resource variable initialized from it shares the constant's buffer:
// the first write into the variable copies it, and the constant's pages stay resident, a second
// variable's worth of memory that nobody reads again. Those pages hold only zeros, and a private
// anonymous page whose frame is taken away reads back as zeros, so no value anyone can see
// changes when the loader moves them into the array it fills (mremap with MREMAP_DONTUNMAP,
// Linux 5.7+: the new array needs no fresh pages, which the kernel would have to find and zero,
// so filling it costs the copy of the rows alone) or, where pages cannot move, releases them
// (madvise MADV_DONTNEED). Only for memory that nothing writes meanwhile: a write into a page
// between the check and the move would be lost.

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4  // Linux 5.7; older headers lack it, older kernels refuse it (EINVAL)
#endif

constexpr std::size_t kZeroBlock = 2 << 20;  // scanned, moved and released this much at a time
constexpr std::size_t kPmd = 2 << 20;        // page tables move whole at the same 2 MiB offset

std::size_t PageBytes() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

struct PageRange {
  std::uintptr_t start = 0, end = 0;
  std::size_t size() const { return end - start; }
};

// Whether [start, end) lies in writable private anonymous mappings only (not a file, not shared
// memory: there, a released page would read back the file's bytes, not zeros).
bool PrivateAnonymous(std::uintptr_t start, std::uintptr_t end) {
  std::FILE* maps = std::fopen("/proc/self/maps", "re");
  if (maps == nullptr) return false;
  std::uintptr_t covered = start;
  char line[4096];
  bool ok = false;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    unsigned long lo = 0, hi = 0, offset = 0, inode = 0;
    char perms[8] = {0};
    int path_at = 0;
    if (std::sscanf(line, "%lx-%lx %7s %lx %*s %lu %n", &lo, &hi, perms, &offset, &inode,
                    &path_at) < 5) {
      continue;
    }
    if (hi <= covered || lo >= end) continue;
    std::string_view path = path_at > 0 ? std::string_view(line + path_at) : std::string_view();
    while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) path.remove_suffix(1);
    const bool anonymous = path.empty() || path == "[heap]" || path.starts_with("[anon");
    // (The offset of an anonymous mapping is not 0 once it has moved; the inode is.)
    if (lo > covered || std::string_view(perms) != "rw-p" || inode != 0 || !anonymous) {
      break;
    }
    covered = hi;
    if (covered >= end) {
      ok = true;
      break;
    }
  }
  std::fclose(maps);
  return ok;
}

// The whole pages inside a C-contiguous buffer, when moving or releasing them is safe: on Linux,
// at least one block, private anonymous memory.
std::optional<PageRange> WholePages(const void* data, std::size_t nbytes) {
  const std::size_t page = PageBytes();
  const auto addr = reinterpret_cast<std::uintptr_t>(data);
  PageRange r{(addr + page - 1) / page * page, (addr + nbytes) / page * page};
  if (data == nullptr || r.end <= r.start || r.size() < kZeroBlock ||
      !PrivateAnonymous(r.start, r.end)) {
    return std::nullopt;
  }
  return r;
}

bool AllZero(std::uintptr_t at, std::size_t n) {
  const auto* w = reinterpret_cast<const std::uint64_t*>(at);
  for (std::size_t i = 0; i < n / 8; i += 512) {  // 4 KiB at a time, OR-reduced
    std::uint64_t acc = 0;
    const std::size_t stop = std::min(n / 8, i + 512);
    for (std::size_t j = i; j < stop; ++j) acc |= w[j];
    if (acc != 0) return false;
  }
  return true;
}

// Bytes from the start of `r` that are zero, in whole blocks (the last may be shorter).
std::size_t ZeroPrefix(const PageRange& r) {
  std::size_t n = 0;
  while (n < r.size()) {
    const std::size_t block = std::min(kZeroBlock, r.size() - n);
    if (!AllZero(r.start + n, block)) break;
    n += block;
  }
  return n;
}

// Releases the zero pages at the start of `r`, block by block, up to the first block that holds
// anything else. Returns the bytes released.
std::size_t ReleaseZeroPrefix(const PageRange& r) {
  std::size_t n = 0;
  while (n < r.size()) {
    const std::size_t block = std::min(kZeroBlock, r.size() - n);
    if (!AllZero(r.start + n, block) ||
        ::madvise(reinterpret_cast<void*>(r.start + n), block, MADV_DONTNEED) != 0) {
      break;
    }
    n += block;
  }
  return n;
}

std::optional<PageRange> ZeroCandidate(const AnyArray& a) {
  auto bytes = ContiguousBytes(a);
  if (!bytes) return std::nullopt;
  return WholePages(bytes->first, bytes->second);
}

struct Mapping {
  void* base;
  std::size_t size;
};

// A new page-aligned writable uint8 array of `nbytes` that owns the zero pages at the start of
// `donor` (moved, not copied). Where pages cannot move (a kernel without MREMAP_DONTUNMAP, a
// donor that is not private anonymous memory or does not start with a block of zeros), the
// donor's zero pages are released instead and the result is None. Either way `donor` still
// reads as it did.
nb::object TakeZeroPages(const AnyArray& donor, std::size_t nbytes) {
  auto r = ZeroCandidate(donor);
  if (!r || nbytes < kZeroBlock) return nb::none();
  const std::size_t page = PageBytes();
  std::optional<Mapping> made;
  std::uintptr_t at = 0;
  {
    nb::gil_scoped_release nogil;
    const std::size_t moved = std::min(ZeroPrefix(*r), nbytes / page * page);
    if (moved > 0) {
      const std::size_t size = (nbytes + page - 1) / page * page + kPmd;
      void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                          -1, 0);
      if (base != MAP_FAILED) {
        const auto b = reinterpret_cast<std::uintptr_t>(base);
        at = b + (r->start - b) % kPmd;  // the donor's offset in its 2 MiB region
        void* got = ::mremap(reinterpret_cast<void*>(r->start), moved, moved,
                             MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP,
                             reinterpret_cast<void*>(at));
        if (got == reinterpret_cast<void*>(at)) {
          made = Mapping{base, size};
        } else {
          ::munmap(base, size);
        }
      }
    }
    if (!made) ReleaseZeroPrefix(*r);
  }
  if (!made) return nb::none();
  auto* owned = new Mapping(*made);
  nb::capsule owner(owned, [](void* p) noexcept {
    auto* m = static_cast<Mapping*>(p);
    ::munmap(m->base, m->size);
    delete m;
  });
  std::size_t shape[1] = {nbytes};
  return nb::cast(nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>(
      reinterpret_cast<std::uint8_t*>(at), 1, shape, owner));
}

}  // namespace
}  // namespace embstore::python

NB_MODULE(_native, m) {
  using embstore::python::PyConnectOptions;
  using embstore::python::PyReadOptions;
  using embstore::python::OutArray;
  using embstore::python::PyCopyHashes;
  using embstore::python::PySource;
  using embstore::python::PyTable;
  m.doc() = "Native core of the embstore package (embstore::client and embstore::store).";
  m.attr("__version__") = std::string(embstore::store::EmbstoreVersion());
  m.def(
      "active_kernel", [] { return std::string(embstore::store::simd::IsaName(embstore::store::simd::ActiveIsa())); },
      "Name of the SIMD kernel used for dtype conversion on this machine.");

  m.def(
      "classify",
      [](const std::string& location) {
        using namespace embstore::client;
        const LocationKind kind = embstore::python::Unwrap(ClassifyLocation(location));
        return nb::make_tuple(std::string(LocationKindName(kind)), HoldsSeveralTables(kind));
      },
      "location"_a,
      "(kind, holds_several_tables) of a location, by the resolver's rules "
      "(client/open_source.h): kind is 'file', 'directory', 'manifest', 'server', 'object' or "
      "'object prefix'. Raises NotFoundError when it is none of them, InvalidArgumentError when "
      "it is malformed.");

  m.def(
      "list_tables",
      [](const std::string& location, const embstore::python::PyConnectOptions& c) {
        return embstore::python::WithoutGil(
            [&] { return embstore::client::ListTables(location, c.o); });
      },
      "location"_a, "connect"_a, "The sorted names of the tables at a location.");

  m.def(
      "starts_with_zero_pages",
      [](const embstore::python::AnyArray& a) {
        auto r = embstore::python::ZeroCandidate(a);
        return r.has_value() &&
               embstore::python::AllZero(r->start, embstore::python::kZeroBlock);
      },
      "array"_a,
      "Whether the array's buffer is private anonymous memory whose first 2 MiB block of whole "
      "pages holds only zeros (what take_zero_pages can move or release).");
  m.def(
      "release_zero_pages",
      [](const embstore::python::AnyArray& a) -> std::size_t {
        auto r = embstore::python::ZeroCandidate(a);
        if (!r) return 0;
        nb::gil_scoped_release nogil;
        return embstore::python::ReleaseZeroPrefix(*r);
      },
      "array"_a,
      "Returns the array's leading all-zero pages to the kernel (they still read zeros); the "
      "bytes released. 0 for memory that is not private anonymous, strided or under 2 MiB.");
  m.def("take_zero_pages", &embstore::python::TakeZeroPages, "donor"_a, "nbytes"_a,
        "A new writable, page-aligned uint8 array of nbytes made of the donor's leading zero "
        "pages, moved (its values are unspecified, as np.empty's); where they cannot move, they "
        "are released instead and the result is None. The donor still reads as it did.");

  nb::class_<PyConnectOptions>(m, "ConnectOptions")
      .def(
          "__init__",
          [](PyConnectOptions* self, const std::string& token, bool tls, const std::string& ca,
             const std::string& cert, const std::string& key, const std::string& server_name,
             double rpc_timeout, const std::string& load_balancing) {
            new (self) PyConnectOptions();
            auto& o = self->o;
            o.token = token;
            o.tls.enabled = tls || !ca.empty() || !cert.empty();
            o.tls.ca_file = ca;
            o.tls.cert_file = cert;
            o.tls.key_file = key;
            o.tls.server_name = server_name;
            o.rpc_timeout = std::chrono::milliseconds(static_cast<long long>(rpc_timeout * 1000));
            o.load_balancing = load_balancing;
          },
          "token"_a = "", "tls"_a = false, "tls_ca"_a = "", "tls_cert"_a = "", "tls_key"_a = "",
          "tls_server_name"_a = "", "rpc_timeout"_a = 30.0, "load_balancing"_a = "");

  nb::class_<PyReadOptions>(m, "ReadOptions")
      .def(
          "__init__",
          [](PyReadOptions* self, int streams, double timeout, bool verify, bool to_f32,
             std::uint64_t chunk_bytes, int max_attempts) {
            new (self) PyReadOptions{streams, timeout, verify, to_f32, chunk_bytes, max_attempts};
          },
          "streams"_a = 0, "timeout"_a = 0.0, "verify"_a = true, "to_f32"_a = false,
          "chunk_bytes"_a = 0, "max_attempts"_a = 8)
      .def_rw("streams", &PyReadOptions::streams)
      .def_rw("timeout", &PyReadOptions::timeout)
      .def_rw("verify", &PyReadOptions::verify)
      .def_rw("to_f32", &PyReadOptions::to_f32)
      .def_rw("chunk_bytes", &PyReadOptions::chunk_bytes)
      .def_rw("max_attempts", &PyReadOptions::max_attempts);

  nb::class_<PyCopyHashes>(m, "CopyHashes")
      .def(nb::init<OutArray, std::size_t>(), "rows"_a, "row_bytes"_a);

  nb::class_<PySource>(m, "Source")
      .def_static("open", &PySource::Open, "location"_a, "table"_a, "connect"_a,
                  "allow_local"_a = true, "open_timeout"_a = 0.0)
      .def_prop_ro("kind", &PySource::kind)
      .def_prop_ro("location", &PySource::location)
      .def_prop_ro("file_path", &PySource::file_path)
      .def("desc", &PySource::desc)
      .def("read_into", &PySource::ReadInto, "begin"_a, "end"_a, "out"_a, "options"_a,
           "progress"_a = nb::none())
      .def("copy_keys", &PySource::CopyKeys, "keys"_a, "out"_a, "options"_a)
      .def("update_into", &PySource::UpdateInto, "out"_a, "options"_a,
           "started"_a = nb::none())
      .def("keys", &PySource::Keys, "begin"_a = 0, "end"_a = nb::none());

  nb::class_<embstore::python::PyWriter>(m, "Writer")
      .def(nb::init<const std::string&, std::uint64_t, const std::string&, bool, bool,
                    const std::map<std::string, std::string>&, const std::string&,
                    std::uint64_t, bool, bool, std::uint64_t>(),
           "dest"_a, "dim"_a, "dtype"_a, "with_keys"_a, "overwrite"_a, "metadata"_a,
           "on_overflow"_a, "block_rows"_a = 0, "durable"_a = true, "row_hashes"_a = true,
           "expected_rows"_a = 0)
      .def_prop_ro("rows", &embstore::python::PyWriter::rows)
      .def("append", &embstore::python::PyWriter::Append, "values"_a, "kind"_a,
           "keys"_a = nb::none())
      .def("finish", &embstore::python::PyWriter::Finish, "progress"_a = nb::none())
      .def("abort", &embstore::python::PyWriter::Abort);

  m.def("write_shard_manifest", &embstore::python::WriteShardManifest, "path"_a, "table"_a,
        "rows"_a, "dim"_a, "dtype"_a, "shards"_a, "overwrite"_a,
        "Writes a shard manifest of (begin, end, target, table) shards, atomically.");
  m.def("convert", &embstore::python::Convert, "input"_a, "output"_a, "format"_a, "dtype"_a,
        "delimiter"_a, "comments"_a, "skip_rows"_a, "threads"_a, "overwrite"_a, "on_overflow"_a,
        "on_duplicate_key"_a, "metadata"_a, "progress"_a = nb::none(),
        "Converts a text or word2vec file into a table at a path, s3:// or hdfs:// "
        "(embstore::convert::Convert); returns its statistics.");

  nb::class_<PyTable>(m, "Table")
      .def(nb::init<const std::string&>(), "path"_a)
      .def_prop_ro("rows", &PyTable::rows)
      .def_prop_ro("dim", &PyTable::dim)
      .def_prop_ro("dtype", &PyTable::dtype)
      .def_prop_ro("path", &PyTable::path)
      .def_prop_ro("data_offset", &PyTable::data_offset)
      .def("verify_rows", &PyTable::VerifyRows, "begin"_a, "end"_a)
      .def("view", &PyTable::View);
}
