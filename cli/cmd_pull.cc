// `embstore pull --from TARGET --table NAME --out OUT.npy|OUT.emb`: downloads a table (or a row
// range) with parallel verified streams, or copies it from the local file when the server's file
// is on this host. With --manifest, the table is split by row ranges across several servers
// (docs/DEPLOY.md, "Sharded tables") and the shards load in parallel. Either way the rows come
// from one client::RowSource and go to the output as they arrive (RowSource::WriteRows): a
// server's chunks straight from gRPC's receive buffers into a .npy file, anything else through two
// windows of about 64 MiB, so memory never holds the table. The output is written atomically.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "client_flags.h"
#include "command.h"
#include "embstore/client/row_source.h"
#include "embstore/client/sharded.h"
#include "embstore/common/atomic_file.h"
#include "embstore/store/format.h"
#include "embstore/store/npy.h"
#include "embstore/store/writer.h"
#include "object_paths.h"
#include "progress.h"

namespace embstore::cli {
namespace {

struct PullArgs {
  ClientFlags client;
  std::string table;
  std::string manifest;
  std::string out;
  std::string rows;
  int streams = 0;
  double timeout_s = 0;
  bool force = false;
  bool no_local = false;
  bool no_keys = false;
};

// "A:B", "A:" or ":B" -> [A, B).
Status ParseRows(const std::string& spec, std::uint64_t rows, std::uint64_t* begin,
                 std::uint64_t* end) {
  *begin = 0;
  *end = rows;
  if (spec.empty()) return Status::OK();
  auto colon = spec.find(':');
  auto bad = [&] {
    return Status::InvalidArgument("--rows '" + spec + "' is not A:B, A: or :B with row numbers");
  };
  if (colon == std::string::npos) return bad();
  auto num = [&](std::string_view s, std::uint64_t* v) {
    if (s.empty()) return true;
    auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  std::string_view a(spec.data(), colon), b(spec.data() + colon + 1, spec.size() - colon - 1);
  if (!num(a, begin) || !num(b, end)) return bad();
  if (*begin > *end || *end > rows) {
    return Status::OutOfRange("--rows " + spec + " is outside the table's " + std::to_string(rows) +
                              " rows");
  }
  return Status::OK();
}

// Where pulled rows go: the output file. Rows arrive through RowSource::WriteRows.
class Sink : public client::RowSink {
 public:
  virtual Status Finish(client::RowSource& src, std::uint64_t begin, std::uint64_t end) = 0;
};

// .npy: the header, then the rows as they are, each written at its place as it arrives (from
// several streams at once).
class NpySink final : public Sink {
 public:
  static Result<std::unique_ptr<NpySink>> Create(const PullArgs& a, bool f32, std::uint64_t rows,
                                                 std::uint64_t dim) {
    EMBSTORE_ASSIGN_OR_RETURN(auto file, AtomicFile::Create(a.out, a.force));
    const std::string header = store::NpyHeader(f32 ? "<f4" : "<f2", rows, dim);
    EMBSTORE_RETURN_NOT_OK(file->Append(header));
    return std::unique_ptr<NpySink>(new NpySink(std::move(file), header.size()));
  }
  Status WriteAt(std::uint64_t offset,
                 std::span<const std::span<const std::byte>> pieces) override {
    return file_->WriteAt(data_offset_ + offset, pieces);
  }
  Status Finish(client::RowSource&, std::uint64_t, std::uint64_t) override {
    return file_->Commit();
  }

 private:
  NpySink(std::unique_ptr<AtomicFile> f, std::uint64_t data_offset)
      : file_(std::move(f)), data_offset_(data_offset) {}
  std::unique_ptr<AtomicFile> file_;
  std::uint64_t data_offset_;
};

// .emb: a table file of the same dtype, block size, keys and user metadata, written by the
// streaming writer (which checksums each block again as the rows go by), in row order.
class TableSink final : public Sink {
 public:
  static Result<std::unique_ptr<TableSink>> Create(const PullArgs& a, const client::TableDesc& d,
                                                   const std::string& from) {
    store::WriterOptions wo;
    wo.dtype = d.dtype;
    wo.dim = d.dim;
    wo.block_rows = d.block_rows;
    wo.overwrite = a.force;
    wo.with_keys = d.has_keys && !a.no_keys;
    wo.metadata = d.metadata;
    wo.creator = "embstore " + std::string(store::EmbstoreVersion()) + " pull from " + from;
    EMBSTORE_ASSIGN_OR_RETURN(auto w, store::TableWriter::Create(a.out, wo));
    return std::unique_ptr<TableSink>(new TableSink(std::move(w), wo.with_keys));
  }
  bool ordered() const override { return true; }
  Status WriteAt(std::uint64_t offset,
                 std::span<const std::span<const std::byte>> pieces) override {
    if (offset != written_) {
      return Status::Internal("rows for output offset " + std::to_string(offset) +
                              " arrived where " + std::to_string(written_) + " was due");
    }
    for (auto piece : pieces) {
      EMBSTORE_RETURN_NOT_OK(writer_->AppendRows(piece));
      written_ += piece.size();
    }
    return Status::OK();
  }
  Status Finish(client::RowSource& src, std::uint64_t begin, std::uint64_t end) override {
    // Keys in slices, so a table of millions of keys never holds them all twice.
    constexpr std::uint64_t kSlice = 1 << 16;
    for (std::uint64_t r = begin; keys_ && r < end; r += kSlice) {
      EMBSTORE_ASSIGN_OR_RETURN(auto keys, src.Keys(r, std::min(end, r + kSlice)));
      for (const auto& k : keys) EMBSTORE_RETURN_NOT_OK(writer_->AppendKey(k));
    }
    return writer_->Finish();
  }

 private:
  TableSink(std::unique_ptr<store::TableWriter> w, bool keys) : writer_(std::move(w)), keys_(keys) {}
  std::unique_ptr<store::TableWriter> writer_;
  bool keys_;
  std::uint64_t written_ = 0;
};

// The object of table NAME under s3://BUCKET/PREFIX: PREFIX/NAME.emb; without a name, the address
// itself must name the object.
Result<objstore::S3Url> S3TableUrl(const std::string& from, const std::string& table) {
  EMBSTORE_ASSIGN_OR_RETURN(objstore::S3Url url, objstore::ParseS3Url(from));
  if (!table.empty()) {
    if (!url.key.empty() && url.key.back() != '/') url.key += "/";
    url.key += table + ".emb";
  } else if (url.NamesPrefix()) {
    return Status::InvalidArgument("--from '" + from +
                                   "' is a bucket or prefix: add --table NAME (the object "
                                   "PREFIX/NAME.emb)");
  }
  return url;
}

// A missing object named without --table may be a prefix: say how to name a table under it.
Status WithPrefixHint(const PullArgs& a, const Status& st) {
  if (st.code() != StatusCode::kNotFound || !a.table.empty()) return st;
  return Status(st.code(), st.message() + "; for table NAME under the prefix " + a.client.target +
                               ", add --table NAME");
}

// A whole table object to a .emb file: the download itself, verified, atomic.
int PullObject(const PullArgs& a, const objstore::S3Url& url) {
  auto s3 = S3FromEnvironment();
  if (!s3.ok()) return ReportError("pull", s3.status());
  auto stats = DownloadTableTo(**s3, url, a.out, a.force, "pull");
  if (!stats.ok()) return ReportError("pull", WithPrefixHint(a, stats.status()));
  std::printf("pulled %s: %.1f MB in %.2f s (%.2f GB/s), every block verified, ETag %s -> %s\n",
              url.ToString().c_str(), stats->bytes / 1e6, stats->seconds,
              stats->seconds > 0 ? stats->bytes / stats->seconds / 1e9 : 0.0,
              stats->etag.c_str(), a.out.c_str());
  return kExitOk;
}

int Pull(const PullArgs& a) {
  const bool npy = a.out.size() >= 4 && a.out.compare(a.out.size() - 4, 4, ".npy") == 0;
  const bool emb = a.out.size() >= 4 && a.out.compare(a.out.size() - 4, 4, ".emb") == 0;
  if (!npy && !emb) {
    return ReportError("pull",
                       Status::InvalidArgument("--out '" + a.out + "' must end in .npy or .emb"));
  }
  const bool s3 = objstore::IsS3Url(a.client.target);
  if (a.manifest.empty() && (a.client.target.empty() || (a.table.empty() && !s3))) {
    return ReportError(
        "pull", Status::InvalidArgument("give --from TARGET and --table NAME, or --manifest FILE"));
  }
  std::unique_ptr<LocalTable> fetched;  // an s3:// table's verified download, when not direct
  if (s3) {
    auto url = S3TableUrl(a.client.target, a.table);
    if (!url.ok()) return ReportError("pull", url.status());
    if (emb && a.rows.empty() && !a.no_keys) return PullObject(a, *url);  // straight to --out
    auto local = LocalTable::Fetch(url->ToString(), "pull", /*verify=*/true);
    if (!local.ok()) return ReportError("pull", WithPrefixHint(a, local.status()));
    fetched = std::move(local).value();
  }
  auto connect = ToConnectOptions(a.client);
  if (!connect.ok() && !s3) return ReportError("pull", connect.status());
  // --timeout bounds the whole pull: connecting and describing the table too.
  const auto started = std::chrono::steady_clock::now();
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  auto opened = fetched != nullptr ? client::OpenFileSource(fetched->path())
                : a.manifest.empty()
                    ? client::OpenServerSource(*connect, a.table, !a.no_local, timeout)
                    // .npy needs only the manifest's shape: shards are contacted (and waited for,
                    // when a server is restarting) as their rows are read. .emb needs every
                    // shard's keys and block size first.
                    : client::OpenShardedSource(a.manifest, *connect, !a.no_local,
                                                /*describe_shards=*/emb);
  if (!opened.ok()) return ReportError("pull", opened.status());
  if (fetched != nullptr) fetched->Unlink();
  client::RowSource& src = **opened;
  const client::TableDesc& desc = src.desc();
  std::uint64_t begin, end;
  Status st = ParseRows(a.rows, desc.rows, &begin, &end);
  if (!st.ok()) return ReportError("pull", st);

  // .npy has no bfloat16: BF16 rows become f32 there.
  const bool to_f32 = npy && desc.dtype == store::DType::kBF16;
  const std::uint64_t out_row = to_f32 ? desc.dim * 4 : desc.row_bytes;
  std::unique_ptr<Sink> sink;
  if (npy) {
    auto s = NpySink::Create(a, to_f32 || desc.dtype == store::DType::kF32, end - begin, desc.dim);
    if (!s.ok()) return ReportError("pull", s.status());
    sink = std::move(s).value();
  } else {
    auto s = TableSink::Create(a, desc, a.manifest.empty() ? a.client.target : a.manifest);
    if (!s.ok()) return ReportError("pull", s.status());
    sink = std::move(s).value();
  }

  Progress progress("pull " + desc.name);
  client::ReadOptions ro;
  ro.streams = a.streams;
  ro.to_f32 = to_f32;
  if (timeout.count() > 0) {
    const auto left = timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::steady_clock::now() - started);
    ro.timeout = std::max(left, std::chrono::milliseconds(1));
  }
  ro.on_event = [&](const client::LoadEvent& e) {
    if (e.kind == client::LoadEvent::Kind::kLocal) return;
    progress.Finish();
    std::fprintf(stderr, "embstore pull: stream %d %s at row %llu: %s\n", e.stream,
                 e.kind == client::LoadEvent::Kind::kResume ? "resumes" : "refetches",
                 static_cast<unsigned long long>(e.row), e.message.c_str());
  };
  const std::uint64_t total = (end - begin) * out_row;
  const auto start = std::chrono::steady_clock::now();
  ro.progress = [&](std::uint64_t done, std::uint64_t) {
    progress.Update(done, total);
    return true;
  };
  // Rows go to the output as they arrive: from a server, straight from gRPC's receive buffers
  // into a .npy file; otherwise through two windows of about 64 MiB (RowSource::WriteRows).
  auto stats = src.WriteRows(begin, end, *sink, ro);
  if (!stats.ok()) {
    progress.Finish();
    Status why = stats.status();
    if (why.code() == StatusCode::kDeadlineExceeded && a.timeout_s > 0) {
      why = Status::DeadlineExceeded("pull of table '" + desc.name + "' passed its --timeout (" +
                                     why.message() + ")");
    }
    return ReportError("pull", why);
  }
  const client::LoadStats& sum = *stats;
  st = sink->Finish(src, begin, end);
  progress.Finish();
  if (!st.ok()) return ReportError("pull", st);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string how;
  if (!a.manifest.empty()) {
    // Which shards held the rows: from the manifest the source read.
    auto m = client::ReadShardManifest(a.manifest);
    std::size_t used = 0;
    for (const auto& sh : m.ok() ? m->shards : std::vector<client::ShardSpec>()) {
      used += sh.begin < end && begin < sh.end;
    }
    how = " from " + std::to_string(used) + " of " +
          std::to_string(m.ok() ? m->shards.size() : 0) + " shards";
  }
  std::printf(
      "pulled %s rows [%llu, %llu) x %llu %s%s: %.1f MB in %.2f s (%.2f GB/s), %s, "
      "%d resumes, %d refetched chunks -> %s\n",
      desc.name.c_str(), static_cast<unsigned long long>(begin),
      static_cast<unsigned long long>(end), static_cast<unsigned long long>(desc.dim),
      to_f32 ? "F32" : std::string(store::DTypeName(desc.dtype)).c_str(), how.c_str(),
      total / 1e6, seconds, seconds > 0 ? total / seconds / 1e9 : 0.0,
      sum.local ? "local file"
                : (std::to_string(sum.streams) + (sum.streams == 1 ? " stream" : " streams"))
                      .c_str(),
      sum.resumes, sum.bad_chunks, a.out.c_str());
  return kExitOk;
}

}  // namespace

RunFn RegisterPull(CLI::App& app) {
  auto args = std::make_shared<PullArgs>();
  CLI::App* sub = app.add_subcommand(
      "pull",
      "Download a table (or rows of it) from a server, or from the servers of a sharded "
      "table's manifest, into .npy or .emb");
  AddClientFlags(sub, &args->client);
  CLI::Option* from = sub->get_option("--from");
  from->required(false);
  from->description(
      "Server: host:port or unix:PATH; or s3://BUCKET/PREFIX with --table NAME (the object "
      "PREFIX/NAME.emb), or s3://BUCKET/KEY.emb");
  CLI::Option* table = sub->add_option("--table", args->table, "Table name (with --from)");
  sub->add_option("--manifest", args->manifest,
                  "Sharded table: JSON manifest of row ranges and their servers "
                  "(docs/DEPLOY.md); replaces --from and --table")
      ->check(CLI::ExistingFile)
      ->excludes(from)
      ->excludes(table);
  sub->add_option("--out", args->out, "Output file: .npy (BF16 becomes f32) or .emb")->required();
  sub->add_option("--rows", args->rows, "Row range A:B (also A: or :B); default all rows");
  sub->add_option("--streams", args->streams, "Parallel streams (default: one per core, at most 4)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--timeout", args->timeout_s, "Give up after this many seconds (default never)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--force", args->force, "Replace OUT if it exists (atomically, on success)");
  sub->add_flag("--no-local", args->no_local,
                "Always stream, even when the server's file is readable on this host");
  sub->add_flag("--no-keys", args->no_keys, "With .emb output, leave the keys out");
  sub->footer(
      "Either --from TARGET --table NAME, or --manifest FILE. With a manifest, every "
      "shard overlapping --rows loads at once (--streams each); the TLS and token flags "
      "apply to every shard's server.");
  return [args]() { return Pull(*args); };
}

}  // namespace embstore::cli
