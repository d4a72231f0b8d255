// `embstore pull --from LOCATION [--table NAME] --out OUT.npy|OUT.emb`: downloads a table (or a
// row range) from any location client::OpenSource takes: a server, with parallel verified
// streams (or from the server's file when it is on this host); an s3:// or hdfs:// object, fetching
// only the blocks of the rows asked for (the whole object to .emb is one verified download); a
// local file or store directory. With --manifest, the table is split by row ranges across several
// servers (docs/DEPLOY.md, "Sharded tables") and the shards load in parallel. Either way the rows
// come from one client::RowSource and go to the output as they arrive (RowSource::WriteRows): a
// server's chunks straight from gRPC's receive buffers into a .npy file, anything else through two
// windows of about 64 MiB, so memory never holds the table. The output is written atomically.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "client_flags.h"
#include "command.h"
#include "embstore/client/row_source.h"
#include "embstore/client/sharded.h"
#include "embstore/client/update.h"
#include "embstore/store/format.h"
#include "object_paths.h"
#include "progress.h"
#include "table_output.h"

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
  bool update = false;
  bool spare = false;
};

// A missing object named without --table may be a prefix: say how to name a table under it.
Status WithPrefixHint(const PullArgs& a, const Status& st) {
  if (st.code() != StatusCode::kNotFound || !a.table.empty()) return st;
  return Status(st.code(), st.message() + "; for table NAME under the prefix " + a.client.target +
                               ", add --table NAME");
}

// A whole table object to a .emb file: the download itself, verified, atomic.
int PullObject(const PullArgs& a, const objstore::ObjectUrl& url) {
  auto store = objstore::OpenObjectStore(url);
  if (!store.ok()) return ReportError("pull", store.status());
  auto stats = DownloadTableTo(**store, url, a.out, a.force, "pull");
  if (!stats.ok()) return ReportError("pull", WithPrefixHint(a, stats.status()));
  std::printf("pulled %s: %.1f MB in %.2f s (%.2f GB/s), every block verified, version %s -> %s\n",
              url.ToString().c_str(), stats->bytes / 1e6, stats->seconds,
              stats->seconds > 0 ? stats->bytes / stats->seconds / 1e9 : 0.0,
              stats->version.c_str(), a.out.c_str());
  return kExitOk;
}

// --update: the rows of the existing --out that differ from the source's version, fetched and
// written into a new file renamed over it (client::UpdateFile). Returns nullopt when the file
// must be fetched whole (said on stderr), else the exit code.
std::optional<int> PullUpdate(const PullArgs& a, const std::string& location) {
  if (!PathExists(a.out)) {
    std::fprintf(stderr, "embstore pull: full fetch: '%s' does not exist yet\n", a.out.c_str());
    return std::nullopt;
  }
  client::UpdateFileOptions o;
  o.read.streams = a.streams;
  o.spare = a.spare;
  // The file (and its spare's hashing) first, while the source is reached.
  auto prepared = client::PrepareUpdateFile(a.out, o);
  if (!prepared.ok()) return ReportError("pull", prepared.status());
  client::SourceOptions so;
  so.allow_local = !a.no_local;
  auto opened = OpenTable(location, a.table, a.client, so);
  if (!opened.ok()) return ReportError("pull", opened.status());
  auto stats = client::UpdateFile(**opened, *std::move(prepared));
  if (!stats.ok()) return ReportError("pull", stats.status());
  const client::UpdateStats& s = *stats;
  if (s.needs_full) {
    std::fprintf(stderr, "embstore pull: full fetch: %s\n", s.full_reason.c_str());
    return std::nullopt;
  }
  const std::string version = client::FormatContentId(s.content_id);
  if (s.up_to_date) {
    std::printf("%s is up to date (version %s)\n", a.out.c_str(), version.c_str());
    return kExitOk;
  }
  std::string spare;
  if (s.used_spare) {
    spare = "; the spare was patched in place (" + std::to_string(s.spare_rows) +
            " more rows from the file it replaced) and swapped in";
  } else if (a.spare) {
    spare = "; a new file was written (" + s.spare_note + "), the one replaced kept as the spare";
  }
  const std::string from_delta =
      s.delta_rows > 0 ? "; " + std::to_string(s.delta_rows) + " of them from its delta object"
                       : "";
  std::printf(
      "updated %s to version %s: %llu of %llu rows changed (compared by %s%s), %llu blocks "
      "refetched, %.2f MB moved (%.2f%% of the table: %.2f MB of hashes, %.2f MB of rows) in "
      "%.2f s (hashes %.2f s, rows %.2f s, check %.2f s, %s %.2f s)%s%s\n",
      a.out.c_str(), version.c_str(), static_cast<unsigned long long>(s.changed_rows),
      static_cast<unsigned long long>(s.rows), s.by_rows ? "row hashes" : "blocks",
      from_delta.c_str(), static_cast<unsigned long long>(s.refetched_blocks), s.moved() / 1e6,
      s.table_bytes ? 100.0 * s.moved() / s.table_bytes : 0.0, s.digest_bytes / 1e6,
      s.row_bytes_moved / 1e6, s.seconds, s.digest_seconds, s.fetch_seconds, s.check_seconds,
      s.used_spare ? "spare patched" : "new file", s.write_seconds,
      s.shared_extents ? "; unchanged rows shared with the old file (reflink)" : "",
      spare.c_str());
  return kExitOk;
}

int Pull(PullArgs a) {
  const bool npy = a.out.size() >= 4 && a.out.compare(a.out.size() - 4, 4, ".npy") == 0;
  const bool emb = a.out.size() >= 4 && a.out.compare(a.out.size() - 4, 4, ".emb") == 0;
  if (!npy && !emb) {
    return ReportError("pull",
                       Status::InvalidArgument("--out '" + a.out + "' must end in .npy or .emb"));
  }
  // Every location opens through client::OpenSource; --manifest is a location that must be one.
  const std::string& location = a.manifest.empty() ? a.client.target : a.manifest;
  if (location.empty()) {
    return ReportError("pull", Status::InvalidArgument(
                                   "give --from LOCATION (with --table NAME where it holds several "
                                   "tables), or --manifest FILE"));
  }
  auto kind = client::ClassifyLocation(location);
  if (!kind.ok()) {
    // A --from or --manifest that names nothing is a wrong flag value: a usage error.
    const Status& why = kind.status();
    return ReportError(
        "pull", why.code() == StatusCode::kNotFound ? Status::InvalidArgument(why.message()) : why);
  }
  if (!a.manifest.empty() && *kind != client::LocationKind::kManifest) {
    return ReportError("pull", Status::InvalidArgument("--manifest '" + a.manifest +
                                                       "' is not a shard manifest (FILE.json)"));
  }
  if (a.spare && !a.update) {
    return ReportError("pull", Status::InvalidArgument("--spare goes with --update"));
  }
  if (a.update) {
    if (!emb || !a.rows.empty() || a.no_keys) {
      return ReportError("pull", Status::InvalidArgument(
                                     "--update brings a whole .emb --out up to date; it takes no "
                                     "--rows or --no-keys"));
    }
    if (auto done = PullUpdate(a, location)) return *done;
    a.force = true;  // the full fetch replaces the file --update was given
  }
  const bool object =
      *kind == client::LocationKind::kObject || *kind == client::LocationKind::kObjectPrefix;
  if (object && emb && a.rows.empty() && !a.no_keys) {
    // The whole object as it is: one verified download straight to --out.
    auto url = client::TableObjectUrl(location, a.table);
    if (!url.ok()) return ReportError("pull", url.status());
    auto parsed = objstore::ParseObjectUrl(*url);
    if (!parsed.ok()) return ReportError("pull", parsed.status());
    return PullObject(a, *parsed);
  }
  // --timeout bounds the whole pull: connecting and describing the table too.
  const auto started = std::chrono::steady_clock::now();
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(a.timeout_s * 1000));
  client::SourceOptions so;
  so.allow_local = !a.no_local;
  so.open_timeout = timeout;
  // .npy needs only a manifest's shape: shards are contacted (and waited for, when a server is
  // restarting) as their rows are read. .emb needs every shard's keys and block size first.
  so.describe_shards = emb;
  auto opened = OpenTable(location, a.table, a.client, so);
  if (!opened.ok())
    return ReportError("pull", object ? WithPrefixHint(a, opened.status()) : opened.status());
  client::RowSource& src = **opened;
  const client::TableDesc& desc = src.desc();
  std::uint64_t begin, end;
  Status st = ParseRows(a.rows, desc.rows, &begin, &end);
  if (!st.ok()) return ReportError("pull", st);

  // .npy has no bfloat16: BF16 rows become f32 there.
  const bool to_f32 = npy && desc.dtype == store::DType::kBF16;
  const std::uint64_t out_row = to_f32 ? desc.dim * 4 : desc.row_bytes;
  std::unique_ptr<TableOutput> sink;
  if (npy) {
    auto s = CreateNpyOutput(a.out, a.force, to_f32 || desc.dtype == store::DType::kF32,
                             end - begin, desc.dim);
    if (!s.ok()) return ReportError("pull", s.status());
    sink = std::move(s).value();
  } else {
    auto s = CreateTableOutput(
        a.out, a.force, desc, !a.no_keys,
        "embstore " + std::string(store::EmbstoreVersion()) + " pull from " + location);
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
    how = " from " + std::to_string(used) + " of " + std::to_string(m.ok() ? m->shards.size() : 0) +
          " shards";
  }
  if (object) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (%.2f MB of the object fetched)",
                  src.transferred_bytes() / 1e6);
    how += buf;
  }
  std::printf(
      "pulled %s rows [%llu, %llu) x %llu %s%s: %.1f MB in %.2f s (%.2f GB/s), %s, "
      "%d resumes, %d refetched chunks -> %s\n",
      desc.name.c_str(), static_cast<unsigned long long>(begin),
      static_cast<unsigned long long>(end), static_cast<unsigned long long>(desc.dim),
      to_f32 ? "F32" : std::string(store::DTypeName(desc.dtype)).c_str(), how.c_str(), total / 1e6,
      seconds, seconds > 0 ? total / seconds / 1e9 : 0.0,
      sum.local
          ? "local file"
          : (std::to_string(sum.streams) + (sum.streams == 1 ? " stream" : " streams")).c_str(),
      sum.resumes, sum.bad_chunks, a.out.c_str());
  return kExitOk;
}

}  // namespace

RunFn RegisterPull(CLI::App& app) {
  auto args = std::make_shared<PullArgs>();
  CLI::App* sub = app.add_subcommand(
      "pull",
      "Download a table (or rows of it) from a server, or from the shards of a sharded "
      "table's manifest, into .npy or .emb");
  AddClientFlags(sub, &args->client);
  CLI::Option* from = sub->get_option("--from");
  from->required(false);
  from->description(
      "Where the table is: a server (host:port, unix:PATH, dns:///NAME:PORT), a store directory, "
      "s3://BUCKET/PREFIX/ or hdfs://NAMENODE[:PORT]/DIR/ (these with --table NAME), a table file, "
      "s3://BUCKET/KEY.emb, hdfs://NAMENODE[:PORT]/PATH.emb, or a shard manifest FILE.json");
  CLI::Option* table =
      sub->add_option("--table", args->table, "Table name, for a --from that holds several tables");
  sub->add_option("--manifest", args->manifest,
                  "Sharded table: JSON manifest of row ranges and where each is "
                  "(docs/DEPLOY.md); replaces --from and --table")
      ->check(CLI::ExistingFile)
      ->excludes(from)
      ->excludes(table);
  sub->add_option("--out", args->out, "Output file: .npy (BF16 becomes f32) or .emb")->required();
  sub->add_option("--rows", args->rows, "Row range A:B (also A: or :B); default all rows");
  sub->add_option("--streams", args->streams, "Parallel streams (default: one per core, at most 4)")
      ->check(CLI::Range(1, 64));
  sub->add_option("--timeout", args->timeout_s, "Give up after this many seconds (default never)")
      ->check(kNonNegativeNumber);
  sub->add_flag("--force", args->force, "Replace OUT if it exists (atomically, on success)");
  sub->add_flag("--no-local", args->no_local,
                "Always stream, even when the server's file is readable on this host");
  sub->add_flag("--no-keys", args->no_keys, "With .emb output, leave the keys out");
  sub->add_flag("--update", args->update,
                "OUT.emb holds an earlier version: fetch only the rows that changed (by row "
                "hashes), check every block, and replace OUT atomically; a different shape or "
                "dtype, or a source without row hashes or checksums, means a full fetch");
  sub->add_flag("--spare", args->spare,
                "With --update: keep the version replaced as a hidden spare beside OUT "
                "(.OUT.spare), and at the next --update patch the spare in place and swap it in "
                "instead of writing a new file, when no process has the spare open or mapped "
                "(twice the disk; docs/CLIENT.md, \"Spares\")");
  sub->footer(
      "Either --from LOCATION (and --table NAME), or --manifest FILE. With a manifest, every "
      "shard overlapping --rows loads at once (--streams each); the TLS and token flags "
      "apply to every shard's server.");
  return [args]() { return Pull(*args); };
}

}  // namespace embstore::cli
