// `embstore pull --from TARGET --table NAME --out OUT.npy|OUT.emb`: downloads a table (or a row
// range) with parallel verified streams, or copies it from the local file when the server's file
// is on this host. The output is written atomically. With --manifest, the table is split by row
// ranges across several servers (docs/DEPLOY.md, "Sharded tables") and the shards load in parallel.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "client_flags.h"
#include "command.h"
#include "embstore/client/sharded.h"
#include "embstore/common/atomic_file.h"
#include "embstore/store/format.h"
#include "embstore/store/npy.h"
#include "embstore/store/writer.h"
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

// A read-write mapping of `bytes` bytes of file `fd` from offset 0, or anonymous memory.
class Buffer {
 public:
  static Result<Buffer> Map(int fd, std::uint64_t bytes, const std::string& what) {
    Buffer b;
    b.size_ = bytes;
    if (bytes == 0) return b;
    // Reserve the file's blocks before mapping them: a store through a shared mapping that
    // finds the disk full has no error to return and kills the process with SIGBUS, while
    // posix_fallocate reports ENOSPC here, before any data moves.
    if (fd >= 0) {
      int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      if (err != 0) {
        return Status::FromErrno("reserve " + std::to_string(bytes) + " bytes for '" + what + "'",
                                 err);
      }
    }
    void* p = fd >= 0 ? ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                      : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return Status::FromErrno("map '" + what + "'", errno);
    b.data_ = static_cast<std::byte*>(p);
    return b;
  }
  Buffer() = default;
  Buffer(Buffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr; }
  ~Buffer() {
    if (data_) ::munmap(data_, size_);
  }
  std::span<std::byte> span(std::uint64_t offset = 0) {
    return {data_ + offset, static_cast<std::size_t>(size_ - offset)};
  }

 private:
  std::byte* data_ = nullptr;
  std::uint64_t size_ = 0;
};

// --manifest: the shards of one logical table, loaded in parallel from their servers.
// The load options both kinds of pull share. BF16 rows become f32 for .npy, which has no
// bfloat16 (`to_f32`). Progress goes to `progress`.
client::LoadOptions LoadOptionsFor(const PullArgs& a, std::uint64_t begin, std::uint64_t end,
                                   bool to_f32, Progress* progress) {
  client::LoadOptions lo;
  lo.begin_row = begin;
  lo.end_row = end;
  lo.streams = a.streams;
  lo.allow_local = !a.no_local;
  lo.timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  lo.to_f32 = to_f32;
  lo.progress = [progress](std::uint64_t done, std::uint64_t total) {
    progress->Update(done, total);
    return true;
  };
  return lo;
}

int PullManifest(const PullArgs& a, bool npy) {
  auto m = client::ReadShardManifest(a.manifest);
  if (!m.ok()) return ReportError("pull", m.status());
  auto opts = ToConnectOptions(a.client);
  if (!opts.ok()) return ReportError("pull", opts.status());
  auto t = client::ShardedTable::Open(*m, *opts);
  if (!t.ok()) return ReportError("pull", t.status());
  client::ShardedTable& table = **t;
  std::uint64_t begin, end;
  Status st = ParseRows(a.rows, m->rows, &begin, &end);
  if (!st.ok()) return ReportError("pull", st);
  Progress progress("pull " + m->table);
  client::LoadOptions lo = LoadOptionsFor(a, begin, end, npy && m->dtype == store::DType::kBF16,
                                          &progress);
  lo.on_event = [&](const client::LoadEvent& e) {
    if (e.kind == client::LoadEvent::Kind::kLocal) return;
    progress.Finish();
    std::fprintf(stderr, "embstore pull: %s\n", e.message.c_str());
  };
  auto need = table.OutputBytes(lo);
  if (!need.ok()) return ReportError("pull", need.status());
  // For .emb: the block size and whether every shard has keys.
  std::uint64_t block_rows = 0;
  bool keys = false;
  if (!npy) {
    auto descs = table.DescribeShards();
    if (!descs.ok()) return ReportError("pull", descs.status());
    keys = !a.no_keys;
    for (const auto& d : *descs) {
      block_rows = std::max(block_rows, d.block_rows);
      keys = keys && d.has_keys;
    }
  }

  auto file = AtomicFile::Create(a.out, a.force);
  if (!file.ok()) return ReportError("pull", file.status());
  Result<client::ShardedLoadStats> stats = Status::Internal("not loaded");
  if (npy) {
    std::string header = store::NpyHeader(
        lo.to_f32 || m->dtype == store::DType::kF32 ? "<f4" : "<f2", end - begin, m->dim);
    auto buf = Buffer::Map((*file)->fd(), header.size() + *need, (*file)->temp_path());
    if (!buf.ok()) return ReportError("pull", buf.status());
    std::memcpy(buf->span().data(), header.data(), header.size());
    stats = table.Load(buf->span(header.size()), lo);
    progress.Finish();
    if (!stats.ok()) return ReportError("pull", stats.status());
    st = (*file)->Commit();
    if (!st.ok()) return ReportError("pull", st);
  } else {
    auto buf = Buffer::Map(-1, *need, "memory for " + m->table);
    if (!buf.ok()) return ReportError("pull", buf.status());
    stats = table.Load(buf->span(), lo);
    progress.Finish();
    if (!stats.ok()) return ReportError("pull", stats.status());
    (*file)->Abort();
    store::WriterOptions wo;
    wo.dtype = m->dtype;
    wo.dim = m->dim;
    if (block_rows > 0) wo.block_rows = block_rows;
    wo.overwrite = a.force;
    wo.with_keys = keys;
    wo.creator =
        "embstore " + std::string(store::EmbstoreVersion()) + " pull --manifest " + a.manifest;
    auto w = store::TableWriter::Create(a.out, wo);
    Status ws = w.status();
    if (ws.ok()) ws = (*w)->AppendRows(buf->span());
    if (ws.ok() && keys) {
      auto k = table.Keys(begin, end);
      ws = k.status();
      for (std::size_t i = 0; ws.ok() && k.ok() && i < k->size(); ++i) {
        ws = (*w)->AppendKey((*k)[i]);
      }
    }
    if (ws.ok()) ws = (*w)->Finish();
    if (!ws.ok()) return ReportError("pull", ws);
  }
  double gbps = stats->seconds > 0 ? stats->bytes / stats->seconds / 1e9 : 0;
  std::printf(
      "pulled %s rows [%llu, %llu) x %llu %s from %zu of %zu shards: %.1f MB in %.2f s "
      "(%.2f GB/s), %d resumes, %d retries of unreachable servers, %d refetched chunks "
      "-> %s\n",
      m->table.c_str(), static_cast<unsigned long long>(begin),
      static_cast<unsigned long long>(end), static_cast<unsigned long long>(m->dim),
      lo.to_f32 ? "F32" : std::string(store::DTypeName(m->dtype)).c_str(), stats->shards.size(),
      m->shards.size(), stats->bytes / 1e6, stats->seconds, gbps, stats->resumes,
      stats->unreachable_retries, stats->bad_chunks, a.out.c_str());
  return kExitOk;
}

int Pull(const PullArgs& a) {
  const bool npy = a.out.size() >= 4 && a.out.compare(a.out.size() - 4, 4, ".npy") == 0;
  const bool emb = a.out.size() >= 4 && a.out.compare(a.out.size() - 4, 4, ".emb") == 0;
  if (!npy && !emb) {
    return ReportError("pull",
                       Status::InvalidArgument("--out '" + a.out + "' must end in .npy or .emb"));
  }
  if (!a.manifest.empty()) return PullManifest(a, npy);
  if (a.client.target.empty() || a.table.empty()) {
    return ReportError(
        "pull", Status::InvalidArgument("give --from TARGET and --table NAME, or --manifest FILE"));
  }
  auto opts = ToConnectOptions(a.client);
  if (!opts.ok()) return ReportError("pull", opts.status());
  auto c = client::Client::Connect(*opts);
  if (!c.ok()) return ReportError("pull", c.status());
  client::Client& cl = **c;
  auto desc = cl.Describe(a.table);
  if (!desc.ok()) return ReportError("pull", desc.status());
  std::uint64_t begin, end;
  Status st = ParseRows(a.rows, desc->rows, &begin, &end);
  if (!st.ok()) return ReportError("pull", st);

  Progress progress("pull " + a.table);
  client::LoadOptions lo = LoadOptionsFor(a, begin, end, npy && desc->dtype == store::DType::kBF16,
                                          &progress);
  lo.on_event = [&](const client::LoadEvent& e) {
    if (e.kind == client::LoadEvent::Kind::kLocal) return;
    progress.Finish();
    std::fprintf(stderr, "embstore pull: stream %d %s at row %llu: %s\n", e.stream,
                 e.kind == client::LoadEvent::Kind::kResume ? "resumes" : "refetches",
                 static_cast<unsigned long long>(e.row), e.message.c_str());
  };
  auto need = client::Client::OutputBytes(*desc, lo);
  if (!need.ok()) return ReportError("pull", need.status());

  auto file = AtomicFile::Create(a.out, a.force);
  if (!file.ok()) return ReportError("pull", file.status());
  Result<client::LoadStats> stats = Status::Internal("not loaded");
  if (npy) {
    // Load straight into the output file's pages: no second copy of the table in memory.
    std::string header = store::NpyHeader(
        lo.to_f32 || desc->dtype == store::DType::kF32 ? "<f4" : "<f2", end - begin, desc->dim);
    auto buf = Buffer::Map((*file)->fd(), header.size() + *need, (*file)->temp_path());
    if (!buf.ok()) return ReportError("pull", buf.status());
    std::memcpy(buf->span().data(), header.data(), header.size());
    stats = cl.Load(a.table, buf->span(header.size()), lo);
  } else {
    auto buf = Buffer::Map(-1, *need, "memory for " + a.table);
    if (!buf.ok()) return ReportError("pull", buf.status());
    stats = cl.Load(a.table, buf->span(), lo);
    if (stats.ok()) {
      // Re-encode as a table file: same dtype, block size, keys and user metadata.
      (*file)->Abort();
      store::WriterOptions wo;
      wo.dtype = desc->dtype;
      wo.dim = desc->dim;
      wo.block_rows = desc->block_rows;
      wo.overwrite = a.force;
      wo.with_keys = desc->has_keys && !a.no_keys;
      wo.metadata = desc->metadata;
      wo.creator =
          "embstore " + std::string(store::EmbstoreVersion()) + " pull from " + a.client.target;
      auto w = store::TableWriter::Create(a.out, wo);
      Status ws = w.status();
      if (ws.ok()) ws = (*w)->AppendRows(buf->span());
      if (ws.ok() && wo.with_keys) {
        auto keys = cl.Keys(a.table, begin, end);
        ws = keys.status();
        for (std::size_t i = 0; ws.ok() && keys.ok() && i < keys->size(); ++i) {
          ws = (*w)->AppendKey((*keys)[i]);
        }
      }
      if (ws.ok()) ws = (*w)->Finish();
      if (!ws.ok()) return ReportError("pull", ws);
    }
  }
  progress.Finish();
  if (!stats.ok()) return ReportError("pull", stats.status());
  if (npy) {
    st = (*file)->Commit();
    if (!st.ok()) return ReportError("pull", st);
  }
  double gbps = stats->seconds > 0 ? stats->bytes / stats->seconds / 1e9 : 0;
  std::printf(
      "pulled %s rows [%llu, %llu) x %llu %s: %.1f MB in %.2f s (%.2f GB/s), %s, "
      "%d resumes, %d refetched chunks -> %s\n",
      a.table.c_str(), static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
      static_cast<unsigned long long>(desc->dim),
      lo.to_f32 ? "F32" : std::string(store::DTypeName(desc->dtype)).c_str(), stats->bytes / 1e6,
      stats->seconds, gbps,
      stats->local
          ? "local file"
          : (std::to_string(stats->streams) + (stats->streams == 1 ? " stream" : " streams"))
                .c_str(),
      stats->resumes, stats->bad_chunks, a.out.c_str());
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
