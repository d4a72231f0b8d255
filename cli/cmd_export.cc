// `embstore export LOCATION OUT.npy [--table NAME] [--rows A:B] [--keys KEYS.txt]
// [--dtype f32|native] [--no-verify]`: a table's matrix (or a row range of it) as a NumPy array,
// every block verified first, and the keys one per line. LOCATION is anything client::OpenSource
// takes (a table file, a store directory, s3://, a server, a shard manifest): an s3:// object
// fetches only the checksum blocks of the rows exported. Both outputs are written atomically.
#include <cstdio>
#include <vector>

#include "client_flags.h"
#include "command.h"
#include "embstore/client/row_source.h"
#include "embstore/common/atomic_file.h"
#include "progress.h"
#include "table_output.h"

namespace embstore::cli {
namespace {

struct ExportArgs {
  ClientFlags client;
  std::string location;
  std::string table;
  std::string out;
  std::string keys_out;
  std::string rows;
  std::string dtype = "f32";
  bool force = false;
  bool verify = true;
};

// Rows [begin, end) to a .npy file, through RowSource::WriteRows (a server's chunks go straight
// from gRPC's receive buffers to the file; other sources through two windows of about 64 MiB).
Status WriteMatrix(client::RowSource& src, const ExportArgs& a, std::uint64_t begin,
                   std::uint64_t end) {
  const client::TableDesc& t = src.desc();
  const bool native = a.dtype == "native";
  if (native && t.dtype == store::DType::kBF16) {
    return Status::InvalidArgument("'" + a.location +
                                   "' holds BF16, which .npy cannot store; "
                                   "export it with --dtype f32");
  }
  const bool as_f32 = !native || t.dtype == store::DType::kF32;
  EMBSTORE_ASSIGN_OR_RETURN(auto out, CreateNpyOutput(a.out, a.force, as_f32, end - begin, t.dim));
  Progress progress("export " + a.location);
  client::ReadOptions read;
  read.to_f32 = as_f32 && t.dtype != store::DType::kF32;
  read.verify = a.verify;
  read.progress = [&](std::uint64_t done, std::uint64_t total) {
    progress.Update(done, total);
    return true;
  };
  auto stats = src.WriteRows(begin, end, *out, read);
  progress.Finish();
  EMBSTORE_RETURN_NOT_OK(stats.status());
  return out->Finish(src, begin, end);
}

Status WriteKeys(client::RowSource& src, const ExportArgs& a, std::uint64_t begin,
                 std::uint64_t end) {
  EMBSTORE_ASSIGN_OR_RETURN(auto out, AtomicFile::Create(a.keys_out, a.force));
  std::string buf;
  EMBSTORE_RETURN_NOT_OK(ForEachKey(src, begin, end, [&](std::uint64_t row, const std::string& k) {
    if (k.find('\n') != std::string::npos || k.find('\r') != std::string::npos) {
      return Status::InvalidArgument("'" + a.location + "': key of row " + std::to_string(row) +
                                     " contains a line break and cannot be written one per line");
    }
    buf.append(k);
    buf += '\n';
    if (buf.size() < (4u << 20)) return Status::OK();
    Status st = out->Append(buf);
    buf.clear();
    return st;
  }));
  EMBSTORE_RETURN_NOT_OK(out->Append(buf));
  return out->Commit();
}

int Export(const ExportArgs& a) {
  auto opened = OpenTable(a.location, a.table, a.client);
  if (!opened.ok()) return ReportError("export", opened.status());
  client::RowSource& src = **opened;
  const client::TableDesc& t = src.desc();
  std::uint64_t begin, end;
  if (Status st = ParseRows(a.rows, t.rows, &begin, &end); !st.ok()) {
    return ReportError("export", st);
  }
  // Refuse early when keys were asked for but the table has none, before writing anything.
  if (!a.keys_out.empty() && !t.has_keys) {
    return ReportError("export",
                       Status::FailedPrecondition("'" + a.location + "' has no keys to export"));
  }
  Status st = WriteMatrix(src, a, begin, end);
  if (st.ok() && !a.keys_out.empty()) st = WriteKeys(src, a, begin, end);
  if (!st.ok()) return ReportError("export", st);
  std::string fetched;
  if (src.transferred_bytes() > 0) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " (%.2f MB transferred)", src.transferred_bytes() / 1e6);
    fetched = buf;
  }
  std::printf("%s: wrote rows [%llu, %llu) x %llu to %s%s%s%s\n", a.location.c_str(),
              static_cast<unsigned long long>(begin), static_cast<unsigned long long>(end),
              static_cast<unsigned long long>(t.dim), a.out.c_str(),
              a.keys_out.empty() ? "" : " and keys to ", a.keys_out.c_str(), fetched.c_str());
  return kExitOk;
}

}  // namespace

RunFn RegisterExport(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* sub =
      app.add_subcommand("export", "Write a table's matrix as .npy (and its keys as text)");
  sub->add_option("LOCATION", args->location,
                  "A table file (.emb), s3://BUCKET/KEY.emb, a shard manifest (.json); or a store "
                  "directory, s3://BUCKET/PREFIX or a server (host:port, unix:PATH) with --table")
      ->required();
  sub->add_option("OUT", args->out, "Output .npy file")->required();
  sub->add_option("--table", args->table, "Table name, for a LOCATION that holds several tables");
  sub->add_option("--rows", args->rows, "Row range A:B (also A: or :B); default all rows");
  sub->add_option("--keys", args->keys_out, "Also write the keys, one per line, to this file");
  sub->add_option("--dtype", args->dtype,
                  "f32 (default) converts F16/BF16 to float32; native keeps F32/F16 as stored")
      ->check(CLI::IsMember({"f32", "native"}));
  sub->add_flag("--force", args->force, "Replace existing output files (atomically, on success)");
  sub->add_flag("--verify,!--no-verify", args->verify,
                "Check every checksum block before writing its rows (default: on)");
  AddConnectFlags(sub, &args->client);
  return [args]() { return Export(*args); };
}

}  // namespace embstore::cli
