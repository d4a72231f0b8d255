// embstore._native: the Python binding of embstore::client and embstore::store.
//
// Loads run with the GIL released; the calling thread wakes about five times a second to take the
// GIL, check for signals (so Ctrl-C interrupts a long load) and call the progress callback.
// Errors surface as the exception classes of embstore.errors, carrying embstore's message (which
// names the server, table, file or row). Buffers are filled in place: the Python side allocates
// them (64-byte aligned, writable) and passes them in.
#include <Python.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "embstore/client/client.h"
#include "embstore/client/sharded.h"
#include "embstore/store/dtype.h"
#include "embstore/store/format.h"
#include "embstore/store/table.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace embstore::python {
namespace {

std::string FormatSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
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
  PyObject* text = PyUnicode_DecodeUTF8(st.message().data(),
                                        static_cast<Py_ssize_t>(st.message().size()),
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

// Runs a load with the GIL released; `progress` (a Python callable or None) and signal checks run
// on this thread with the GIL held. A pending KeyboardInterrupt cancels the load and is re-raised.
client::LoadStats RunLoad(client::Client& c, const std::string& table, std::span<std::byte> out,
                          client::LoadOptions o, nb::object progress) {
  bool interrupted = false;
  o.progress = ProgressCallback(&interrupted, progress);
  std::optional<Result<client::LoadStats>> r;
  {
    nb::gil_scoped_release nogil;
    r.emplace(c.Load(table, out, o));
  }
  if (interrupted && PyErr_Occurred()) throw nb::python_error();  // KeyboardInterrupt and co.
  return Unwrap(std::move(*r));
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

client::ConnectOptions MakeConnectOptions(const std::string& target, const std::string& token,
                                          bool tls, const std::string& ca, const std::string& cert,
                                          const std::string& key, const std::string& server_name,
                                          double rpc_timeout, const std::string& load_balancing) {
  client::ConnectOptions o;
  o.target = target;
  o.token = token;
  o.tls.enabled = tls || !ca.empty() || !cert.empty();
  o.tls.ca_file = ca;
  o.tls.cert_file = cert;
  o.tls.key_file = key;
  o.tls.server_name = server_name;
  o.rpc_timeout = std::chrono::milliseconds(static_cast<long long>(rpc_timeout * 1000));
  o.load_balancing = load_balancing;
  return o;
}

class PyClient {
 public:
  PyClient(const std::string& target, const std::string& token, bool tls, const std::string& ca,
           const std::string& cert, const std::string& key, const std::string& server_name,
           double rpc_timeout, const std::string& load_balancing) {
    client_ = Unwrap(client::Client::Connect(MakeConnectOptions(
        target, token, tls, ca, cert, key, server_name, rpc_timeout, load_balancing)));
  }

  std::vector<nb::dict> ListTables() {
    std::vector<nb::dict> out;
    for (const auto& d : WithoutGil([&] { return client_->ListTables(); })) {
      out.push_back(DescToDict(d));
    }
    return out;
  }

  nb::dict Describe(const std::string& table) {
    return DescToDict(WithoutGil([&] { return client_->Describe(table); }));
  }

  nb::dict LoadInto(const std::string& table, OutArray out, std::uint64_t begin,
                    std::optional<std::uint64_t> end, int streams, bool to_f32, double timeout,
                    bool allow_local, bool verify, nb::object progress) {
    client::LoadOptions o;
    o.begin_row = begin;
    o.end_row = end;
    o.streams = streams;
    o.to_f32 = to_f32;
    o.allow_local = allow_local;
    o.verify = verify;
    o.timeout = std::chrono::milliseconds(static_cast<long long>(timeout * 1000));
    return StatsToDict(RunLoad(*client_, table, Bytes(out), o, progress));
  }

  // (row ids, missing key indices, raw row bytes)
  nb::tuple LookupKeys(const std::string& table, const std::vector<std::string>& keys) {
    return LookupTuple(WithoutGil([&] { return client_->LookupKeys(table, keys); }));
  }

  nb::tuple LookupRows(const std::string& table, const std::vector<std::uint64_t>& rows) {
    return LookupTuple(WithoutGil([&] { return client_->LookupRows(table, rows); }));
  }

  std::vector<std::string> Keys(const std::string& table, std::uint64_t begin,
                                std::optional<std::uint64_t> end) {
    return WithoutGil([&] { return client_->Keys(table, begin, end); });
  }

 private:
  static nb::tuple LookupTuple(const client::LookupResult& l) {
    nb::bytes data(reinterpret_cast<const char*>(l.data.data()), l.data.size());
    return nb::make_tuple(l.rows, l.missing, data);
  }

  std::unique_ptr<client::Client> client_;
};

// A table split by row ranges across servers, read through its manifest (docs/DEPLOY.md).
class PyShardedTable {
 public:
  PyShardedTable(const std::string& manifest, const std::string& token, bool tls,
                 const std::string& ca, const std::string& cert, const std::string& key,
                 const std::string& server_name, double rpc_timeout,
                 const std::string& load_balancing) {
    auto o =
        MakeConnectOptions("", token, tls, ca, cert, key, server_name, rpc_timeout, load_balancing);
    auto m = Unwrap(client::ReadShardManifest(manifest));
    table_ = Unwrap(client::ShardedTable::Open(std::move(m), o));
  }

  // The logical table, as Client.describe() has it; asks every shard's server and checks it
  // against the manifest. has_keys when every shard has keys.
  nb::dict Describe() {
    auto descs = WithoutGil([&] { return table_->DescribeShards(); });
    const auto& m = table_->manifest();
    nb::dict out;
    out["name"] = m.table;
    out["rows"] = m.rows;
    out["dim"] = m.dim;
    out["dtype"] = std::string(store::DTypeName(m.dtype));
    out["row_bytes"] = m.dim * store::DTypeSize(m.dtype);
    bool keys = !descs.empty();
    for (const auto& d : descs) keys = keys && d.has_keys;
    out["has_keys"] = keys;
    out["metadata"] = std::map<std::string, std::string>();
    out["manifest"] = m.origin;
    out["shards"] = m.shards.size();
    return out;
  }

  nb::dict LoadInto(OutArray out, std::uint64_t begin, std::optional<std::uint64_t> end,
                    int streams, bool to_f32, double timeout, bool allow_local, bool verify,
                    nb::object progress) {
    client::LoadOptions o;
    o.begin_row = begin;
    o.end_row = end;
    o.streams = streams;
    o.to_f32 = to_f32;
    o.allow_local = allow_local;
    o.verify = verify;
    o.timeout = std::chrono::milliseconds(static_cast<long long>(timeout * 1000));
    bool interrupted = false;
    o.progress = ProgressCallback(&interrupted, progress);
    std::span<std::byte> bytes = Bytes(out);
    std::optional<Result<client::ShardedLoadStats>> r;
    {
      nb::gil_scoped_release nogil;
      r.emplace(table_->Load(bytes, o));
    }
    if (interrupted && PyErr_Occurred()) throw nb::python_error();
    client::ShardedLoadStats s = Unwrap(std::move(*r));
    nb::dict d;
    d["rows"] = s.rows;
    d["bytes"] = s.bytes;
    d["wire_bytes"] = s.wire_bytes;
    d["seconds"] = s.seconds;
    d["resumes"] = s.resumes;
    d["bad_chunks"] = s.bad_chunks;
    d["unreachable_retries"] = s.unreachable_retries;
    std::vector<nb::dict> shards;
    for (const auto& sh : s.shards) {
      nb::dict x = StatsToDict(sh.stats);
      x["shard"] = sh.shard;
      x["begin"] = sh.begin;
      x["end"] = sh.end;
      shards.push_back(x);
    }
    d["shards"] = shards;
    return d;
  }

  std::vector<std::string> Keys(std::uint64_t begin, std::optional<std::uint64_t> end) {
    return WithoutGil([&] { return table_->Keys(begin, end); });
  }

 private:
  std::unique_ptr<client::ShardedTable> table_;
};

// A local table file, mapped read-only.
class PyTable {
 public:
  explicit PyTable(const std::string& path) {
    table_ = WithoutGil([&] { return store::Table::Open(path); });
  }

  std::uint64_t rows() const { return table_->rows(); }
  std::uint64_t dim() const { return table_->dim(); }
  std::string dtype() const { return std::string(store::DTypeName(table_->dtype())); }
  bool has_keys() const { return table_->has_keys(); }
  std::string path() const { return table_->path(); }
  std::uint64_t data_offset() const { return table_->data_offset(); }
  std::uint64_t content_id() const { return store::ContentId(*table_); }
  int format_version() const { return table_->format_version(); }
  bool keys_checksummed() const { return table_->keys_checksummed(); }
  std::map<std::string, std::string> metadata() const { return table_->user_metadata(); }

  // Rows [begin, end) into `out` (raw bytes, or f32 when to_f32), verifying their blocks first
  // when asked. Releases the GIL; between 16 MiB pieces it checks for Ctrl-C, calls `progress`
  // (done, total bytes; after the first piece, then at most ten times a second, and once at the
  // end; False cancels) and
  // stops with DeadlineExceeded once `timeout` seconds (0: none) have passed.
  void ReadInto(std::uint64_t begin, std::uint64_t end, OutArray out, bool to_f32, bool verify,
                double timeout, nb::object progress) {
    auto dst = Bytes(out);
    const std::uint64_t per_row = to_f32 ? table_->dim() * 4 : table_->row_bytes();
    Check(table_->RowBytes(begin, end).status());
    if (dst.size() != (end - begin) * per_row) {
      throw nb::value_error(("output buffer holds " + std::to_string(dst.size()) +
                             " bytes, rows need " + std::to_string((end - begin) * per_row))
                                .c_str());
    }
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    auto last_report = start;
    const std::uint64_t total = dst.size();
    const std::uint64_t step = std::max<std::uint64_t>(1, (16u << 20) / table_->row_bytes());
    for (std::uint64_t r = begin; r < end; r += step) {
      std::uint64_t e = std::min(end, r + step);
      Status st;
      {
        nb::gil_scoped_release nogil;
        store::CopyOptions copy;
        copy.to_f32 = to_f32;
        copy.verify = verify;
        st = table_->CopyRows(r, e, dst.subspan((r - begin) * per_row, (e - r) * per_row), copy);
      }
      Check(st);
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      const auto now = Clock::now();
      const double elapsed = std::chrono::duration<double>(now - start).count();
      if (timeout > 0 && elapsed > timeout && e < end) {
        Raise(Status::DeadlineExceeded("loading rows [" + std::to_string(begin) + ", " +
                                       std::to_string(end) + ") of '" + table_->path() +
                                       "' did not finish within " + FormatSeconds(timeout) +
                                       " (timeout=); " + std::to_string(r - begin + (e - r)) +
                                       " rows were read"));
      }
      const bool first = r == begin;
      const bool last = e == end;
      if (!progress.is_none() &&
          (first || last || now - last_report >= std::chrono::milliseconds(100))) {
        last_report = now;
        nb::object keep_going = progress((e - begin) * per_row, total);
        if (!keep_going.is_none() && !nb::cast<bool>(keep_going) && !last) {
          Raise(Status::Cancelled("loading '" + table_->path() + "' was cancelled by the " +
                                  "progress callback"));
        }
      }
    }
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

  // Row of each key, or -1 when the table lacks it. With `verify`, the key tensors are checked
  // against their checksums first (once per mapping).
  std::vector<std::int64_t> FindKeys(const std::vector<std::string>& keys, bool verify) const {
    std::vector<std::int64_t> out(keys.size(), -1);
    Status st;
    {
      nb::gil_scoped_release nogil;
      if (verify) st = table_->VerifyKeys();
      for (std::size_t i = 0; st.ok() && i < keys.size(); ++i) {
        auto r = table_->FindKey(keys[i]);
        if (r) out[i] = static_cast<std::int64_t>(*r);
      }
      if (st.ok()) st = table_->CheckIntact();
    }
    Check(st);
    return out;
  }

  // Rows `rows` (a 1-D uint64 array) into `out`, in order; each row's checksum block verified
  // first (once per mapping) when asked.
  void GatherInto(nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> rows,
                  OutArray out, bool to_f32, bool verify) {
    auto dst = Bytes(out);
    store::CopyOptions copy;
    copy.to_f32 = to_f32;
    copy.verify = verify;
    std::span<const std::uint64_t> ids(rows.data(), rows.size());
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = table_->GatherRows(ids, dst, copy);
    }
    Check(st);
  }

  std::vector<std::string> Keys(std::uint64_t begin, std::optional<std::uint64_t> end,
                                bool verify) const {
    if (!table_->has_keys())
      Raise(Status::FailedPrecondition("'" + table_->path() + "' has no keys"));
    std::uint64_t e = end.value_or(table_->rows());
    Check(table_->RowBytes(begin, e).status());
    if (verify) Check(table_->VerifyKeys());
    std::vector<std::string> out;
    out.reserve(e - begin);
    for (std::uint64_t r = begin; r < e; ++r) out.emplace_back(table_->Key(r));
    Check(table_->CheckIntact());
    return out;
  }

  void Verify() const {
    Status st;
    {
      nb::gil_scoped_release nogil;
      st = table_->VerifyAll();
    }
    Check(st);
  }

 private:
  std::shared_ptr<const store::Table> table_;
};

}  // namespace
}  // namespace embstore::python

NB_MODULE(_native, m) {
  using embstore::python::PyClient;
  using embstore::python::PyShardedTable;
  using embstore::python::PyTable;
  m.doc() = "Native core of the embstore package (embstore::client and embstore::store).";
  m.attr("__version__") = std::string(embstore::store::EmbstoreVersion());
  m.def(
      "active_kernel", [] { return std::string(embstore::store::ActiveKernelName()); },
      "Name of the SIMD kernel used for dtype conversion on this machine.");

  nb::class_<PyClient>(m, "Client")
      .def(nb::init<const std::string&, const std::string&, bool, const std::string&,
                    const std::string&, const std::string&, const std::string&, double,
                    const std::string&>(),
           "target"_a, "token"_a = "", "tls"_a = false, "tls_ca"_a = "", "tls_cert"_a = "",
           "tls_key"_a = "", "tls_server_name"_a = "", "rpc_timeout"_a = 30.0,
           "load_balancing"_a = "")
      .def("list_tables", &PyClient::ListTables)
      .def("describe", &PyClient::Describe, "table"_a)
      .def("load_into", &PyClient::LoadInto, "table"_a, "out"_a, "begin"_a = 0,
           "end"_a = nb::none(), "streams"_a = 0, "to_f32"_a = false, "timeout"_a = 0.0,
           "allow_local"_a = true, "verify"_a = true, "progress"_a = nb::none())
      .def("lookup_keys", &PyClient::LookupKeys, "table"_a, "keys"_a)
      .def("lookup_rows", &PyClient::LookupRows, "table"_a, "rows"_a)
      .def("keys", &PyClient::Keys, "table"_a, "begin"_a = 0, "end"_a = nb::none());

  nb::class_<PyShardedTable>(m, "ShardedTable")
      .def(nb::init<const std::string&, const std::string&, bool, const std::string&,
                    const std::string&, const std::string&, const std::string&, double,
                    const std::string&>(),
           "manifest"_a, "token"_a = "", "tls"_a = false, "tls_ca"_a = "", "tls_cert"_a = "",
           "tls_key"_a = "", "tls_server_name"_a = "", "rpc_timeout"_a = 30.0,
           "load_balancing"_a = "")
      .def("describe", &PyShardedTable::Describe)
      .def("load_into", &PyShardedTable::LoadInto, "out"_a, "begin"_a = 0, "end"_a = nb::none(),
           "streams"_a = 0, "to_f32"_a = false, "timeout"_a = 0.0, "allow_local"_a = true,
           "verify"_a = true, "progress"_a = nb::none())
      .def("keys", &PyShardedTable::Keys, "begin"_a = 0, "end"_a = nb::none());

  nb::class_<PyTable>(m, "Table")
      .def(nb::init<const std::string&>(), "path"_a)
      .def_prop_ro("rows", &PyTable::rows)
      .def_prop_ro("dim", &PyTable::dim)
      .def_prop_ro("dtype", &PyTable::dtype)
      .def_prop_ro("has_keys", &PyTable::has_keys)
      .def_prop_ro("path", &PyTable::path)
      .def_prop_ro("data_offset", &PyTable::data_offset)
      .def_prop_ro("content_id", &PyTable::content_id)
      .def_prop_ro("format_version", &PyTable::format_version)
      .def_prop_ro("keys_checksummed", &PyTable::keys_checksummed)
      .def_prop_ro("metadata", &PyTable::metadata)
      .def("read_into", &PyTable::ReadInto, "begin"_a, "end"_a, "out"_a, "to_f32"_a = false,
           "verify"_a = false, "timeout"_a = 0.0, "progress"_a = nb::none())
      .def("view", &PyTable::View)
      .def("find_keys", &PyTable::FindKeys, "keys"_a, "verify"_a = true)
      .def("gather_into", &PyTable::GatherInto, "rows"_a, "out"_a, "to_f32"_a = false,
           "verify"_a = true)
      .def("keys", &PyTable::Keys, "begin"_a = 0, "end"_a = nb::none(), "verify"_a = true)
      .def("verify", &PyTable::Verify);
}
