// `embstore export FILE OUT.npy [--keys KEYS.txt] [--dtype f32|native] [--no-verify]`: the matrix
// as a NumPy array (every block verified first), and the keys one per line. Both outputs are
// written atomically.
#include <cstdio>
#include <vector>

#include "command.h"
#include "object_paths.h"
#include "embstore/client/row_source.h"
#include "embstore/common/atomic_file.h"
#include "embstore/store/npy.h"
#include "embstore/store/table.h"
#include "progress.h"

namespace embstore::cli {
namespace {

struct ExportArgs {
  std::string file;
  std::string out;
  std::string keys_out;
  std::string dtype = "f32";
  bool force = false;
  bool verify = true;
};

Status WriteMatrix(client::RowSource& src, const ExportArgs& a) {
  const client::TableDesc& t = src.desc();
  const bool native = a.dtype == "native";
  if (native && t.dtype == store::DType::kBF16) {
    return Status::InvalidArgument("'" + a.file +
                                   "' holds BF16, which .npy cannot store; "
                                   "export it with --dtype f32");
  }
  const bool as_f32 = !native || t.dtype == store::DType::kF32;
  EMBSTORE_ASSIGN_OR_RETURN(auto out, AtomicFile::Create(a.out, a.force));
  EMBSTORE_RETURN_NOT_OK(out->Append(store::NpyHeader(as_f32 ? "<f4" : "<f2", t.rows, t.dim)));
  Progress progress("export " + a.file);
  // Pieces of about 16 MiB, read by the file source (pread, blocks verified in parallel unless
  // --no-verify) and then written; a file truncated underneath is a clear error, never a crash
  // or a partial output.
  const std::uint64_t out_row = t.dim * (as_f32 ? 4 : 2);
  const std::uint64_t step = std::max<std::uint64_t>(1, (16u << 20) / out_row);
  const std::uint64_t total = t.rows * out_row;
  std::vector<std::byte> buf;
  client::ReadOptions read;
  read.to_f32 = as_f32 && t.dtype != store::DType::kF32;
  read.verify = a.verify;
  for (std::uint64_t r = 0; r < t.rows; r += step) {
    const std::uint64_t end = std::min(t.rows, r + step);
    buf.resize((end - r) * out_row);
    EMBSTORE_RETURN_NOT_OK(src.CopyRows(r, end, buf, read).status());
    EMBSTORE_RETURN_NOT_OK(out->Append(buf));
    progress.Update(end * out_row, total);
  }
  progress.Finish();
  return out->Commit();
}

Status WriteKeys(client::RowSource& src, const ExportArgs& a) {
  const client::TableDesc& t = src.desc();
  if (!t.has_keys) return Status::InvalidArgument("'" + a.file + "' has no keys to export");
  EMBSTORE_ASSIGN_OR_RETURN(auto out, AtomicFile::Create(a.keys_out, a.force));
  // Keys in slices of 64k rows (checked against their checksums by the source).
  constexpr std::uint64_t kSlice = 65536;
  std::vector<std::string> keys;
  std::string buf;
  for (std::uint64_t r = 0; r < t.rows; ++r) {
    if (r % kSlice == 0) {
      EMBSTORE_ASSIGN_OR_RETURN(keys, src.Keys(r, std::min(t.rows, r + kSlice)));
    }
    const std::string& k = keys[r % kSlice];
    if (k.find('\n') != std::string::npos || k.find('\r') != std::string::npos) {
      return Status::InvalidArgument("'" + a.file + "': key of row " + std::to_string(r) +
                                     " contains a line break and cannot be written one per line");
    }
    buf.append(k);
    buf += '\n';
    if (buf.size() >= (4u << 20)) {
      EMBSTORE_RETURN_NOT_OK(out->Append(buf));
      buf.clear();
    }
  }
  EMBSTORE_RETURN_NOT_OK(out->Append(buf));
  return out->Commit();
}

}  // namespace

RunFn RegisterExport(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* sub =
      app.add_subcommand("export", "Write a table's matrix as .npy (and its keys as text)");
  sub->add_option("FILE", args->file, "Table file (.emb), or s3://BUCKET/KEY (downloaded first)")
      ->required();
  sub->add_option("OUT", args->out, "Output .npy file")->required();
  sub->add_option("--keys", args->keys_out, "Also write the keys, one per line, to this file");
  sub->add_option("--dtype", args->dtype,
                  "f32 (default) converts F16/BF16 to float32; native keeps F32/F16 as stored")
      ->check(CLI::IsMember({"f32", "native"}));
  sub->add_flag("--force", args->force, "Replace existing output files (atomically, on success)");
  sub->add_flag("--verify,!--no-verify", args->verify,
                "Check every checksum block before writing its rows (default: on)");
  return [args]() {
    auto local = LocalTable::Fetch(args->file, "export", /*verify=*/false);
    if (!local.ok()) return ReportError("export", local.status());
    auto opened = client::OpenFileSource((*local)->path());
    if (!opened.ok()) return ReportError("export", (*local)->Named(opened.status()));
    (*local)->Unlink();
    client::RowSource& src = **opened;
    const client::TableDesc& t = src.desc();
    // Refuse early when keys were asked for but the table has none, before writing anything.
    if (!args->keys_out.empty() && !t.has_keys) {
      return ReportError("export",
                         Status::FailedPrecondition("'" + args->file + "' has no keys to export"));
    }
    Status st = WriteMatrix(src, *args);
    if (st.ok() && !args->keys_out.empty()) st = WriteKeys(src, *args);
    if (!st.ok()) return ReportError("export", (*local)->Named(st));
    std::printf("%s: wrote %llu x %llu to %s%s%s\n", args->file.c_str(),
                static_cast<unsigned long long>(t.rows), static_cast<unsigned long long>(t.dim),
                args->out.c_str(), args->keys_out.empty() ? "" : " and keys to ",
                args->keys_out.c_str());
    return kExitOk;
  };
}

}  // namespace embstore::cli
