// `embstore verify FILE`: reads every byte of the matrix and checks each block's checksum.
#include <cstdio>

#include "command.h"
#include "object_paths.h"
#include "embstore/store/table.h"
#include "progress.h"

namespace embstore::cli {

RunFn RegisterVerify(CLI::App& app) {
  struct Args {
    std::string file;
    int max_report = 20;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Check every checksum block of a table file; exit 1 naming each bad block");
  sub->add_option("FILE", args->file, "Table file (.emb), or s3://BUCKET/KEY (downloaded first)")
      ->required();
  sub->add_option("--max-report", args->max_report, "Bad blocks to list at most (default 20)")
      ->check(CLI::PositiveNumber);
  return [args]() {
    // An object is downloaded as it is (not checked on the way), so this reports its bad blocks.
    auto local = LocalTable::Fetch(args->file, "verify", /*verify=*/false);
    if (!local.ok()) return ReportError("verify", local.status());
    auto opened = store::Table::Open((*local)->path());
    if (!opened.ok()) return ReportError("verify", (*local)->Named(opened.status()));
    (*local)->Unlink();
    const store::Table& t = **opened;
    Progress progress("verify " + args->file);
    const std::uint64_t total = t.rows() * t.row_bytes();
    std::uint64_t bad = 0;
    for (std::uint64_t b = 0; b < t.num_blocks(); ++b) {
      const std::uint64_t first = b * t.block_rows();
      const std::uint64_t last = t.rows() - first <= t.block_rows() ? t.rows()
                                                                    : first + t.block_rows();
      Status st = t.VerifyRows(first, last);
      if (!st.ok()) {
        progress.Finish();
        if (bad < static_cast<std::uint64_t>(args->max_report)) {
          std::fprintf(stderr, "embstore verify: %s\n", (*local)->Named(st.message()).c_str());
        }
        ++bad;
      }
      progress.Update(last * t.row_bytes(), total);
    }
    progress.Finish();
    std::string keys_note;
    bool keys_bad = false;
    if (t.has_keys()) {
      if (!t.keys_checksummed()) {
        keys_note = "; keys unchecked (format version " + std::to_string(t.format_version()) +
                    " has no key checksums)";
      } else if (Status st = t.VerifyKeys(); !st.ok()) {
        std::fprintf(stderr, "embstore verify: %s\n", (*local)->Named(st.message()).c_str());
        keys_bad = true;
      } else {
        keys_note = " and the keys";
      }
    }
    if (bad > 0 || keys_bad) {
      std::fprintf(stderr, "embstore verify: '%s': %llu of %llu blocks are corrupt%s\n",
                   args->file.c_str(), static_cast<unsigned long long>(bad),
                   static_cast<unsigned long long>(t.num_blocks()),
                   keys_bad ? ", and so are the keys" : "");
      return kExitFailure;
    }
    std::printf("%s: ok, %llu rows x %llu %s, %llu blocks%s verified in %.2f s\n",
                args->file.c_str(), static_cast<unsigned long long>(t.rows()),
                static_cast<unsigned long long>(t.dim()),
                std::string(store::DTypeName(t.dtype())).c_str(),
                static_cast<unsigned long long>(t.num_blocks()), keys_note.c_str(),
                progress.Seconds());
    return kExitOk;
  };
}

}  // namespace embstore::cli
