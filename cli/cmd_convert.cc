// `embstore convert INPUT OUTPUT`: text embeddings (np.savetxt matrices, word2vec, GloVe,
// word2vec binary; plain or gzip; "-" for stdin) into a table file. docs/CONVERT.md.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "command.h"
#include "embstore/convert/convert.h"
#include "object_paths.h"
#include "progress.h"

namespace embstore::cli {

RunFn RegisterConvert(CLI::App& app) {
  struct Args {
    std::string input;
    std::string output;
    std::string format = "auto";
    std::string dtype = "f32";
    std::string delimiter;
    std::string comments = "#";
    std::uint64_t skip_rows = 0;
    unsigned threads = 0;
    bool force = false;
    std::vector<std::string> meta;
    std::string on_duplicate_key = "error";
    std::string on_overflow = "error";
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand(
      "convert",
      "Convert a text embedding file (np.savetxt matrix, word2vec/fastText .vec, GloVe, or "
      "word2vec binary; optionally gzip; '-' reads stdin) into a table file");
  sub->add_option("INPUT", args->input, "Input file, or '-' for standard input")->required();
  sub->add_option("OUTPUT", args->output,
                  "Table file to write (.emb), s3://BUCKET/KEY or hdfs://NAMENODE[:PORT]/PATH "
                  "(written locally under $TMPDIR, then uploaded: the object appears whole or "
                  "not at all)")
      ->required();
  sub->add_option("--format", args->format,
                  "auto|matrix|word2vec|glove|word2vec-binary (default auto: sniffs the first "
                  "lines and says what it picked)")
      ->check(CLI::IsMember({"auto", "matrix", "word2vec", "glove", "word2vec-binary"}));
  sub->add_option("--dtype", args->dtype,
                  "Element type of the table: f32|f16|bf16 (default f32); values are rounded "
                  "once, correctly, from the decimal text")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "float32", "float16", "bfloat16"}));
  sub->add_option("--delimiter", args->delimiter,
                  "Matrix field separator: one character (default: runs of spaces and tabs); "
                  "'\\t' is accepted for a tab");
  sub->add_option("--comments", args->comments,
                  "Comment marker for matrix text (default '#'; empty disables comments)");
  sub->add_option("--skip-rows", args->skip_rows,
                  "Lines to skip at the start, comment lines included (as np.loadtxt skiprows)");
  sub->add_option("--threads", args->threads, "Parser threads (default: all cores)");
  sub->add_flag("--force", args->force,
                "Replace OUTPUT if it exists (atomically, only when the conversion succeeds)");
  sub->add_option("--meta", args->meta, "User metadata KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  sub->add_option("--on-duplicate-key", args->on_duplicate_key,
                  "error|first|last: a key seen again fails, keeps the first row, or keeps the "
                  "first row's position with the last row's values (default error)")
      ->check(CLI::IsMember({"error", "first", "last"}));
  sub->add_option("--on-overflow", args->on_overflow,
                  "error|inf: a finite value too large for the dtype fails, or is stored as "
                  "+/-inf (default error)")
      ->check(CLI::IsMember({"error", "inf"}));
  sub->footer(
      "Prints one summary line on success. Exit 1 names file:line:column and quotes the bad "
      "text; no output file is left behind. Exit 2 for usage errors.");

  return [args]() {
    convert::ConvertOptions o;
    o.format = *convert::ParseInputFormat(args->format);
    o.dtype = *store::ParseDType(args->dtype);
    if (!args->delimiter.empty()) {
      std::string d = args->delimiter;
      if (d == "\\t" || d == "tab") d = "\t";
      if (d.size() != 1) {
        return ReportError("convert",
                           Status::InvalidArgument("--delimiter must be one character, got '" +
                                                   args->delimiter + "'"));
      }
      o.delimiter = d[0];
    }
    o.comments = args->comments;
    o.skip_rows = args->skip_rows;
    o.threads = args->threads;
    o.overwrite = args->force;
    o.on_duplicate_key = *convert::ParseDuplicateKeyPolicy(args->on_duplicate_key);
    o.on_overflow = args->on_overflow == "inf" ? convert::OverflowPolicy::kInfinity
                                               : convert::OverflowPolicy::kError;
    for (const std::string& kv : args->meta) {
      std::size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        return ReportError("convert",
                           Status::InvalidArgument("--meta expects KEY=VALUE, got '" + kv + "'"));
      }
      o.metadata[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    Progress progress("convert " + args->input);
    o.progress = [&progress](std::uint64_t done, std::uint64_t total) {
      progress.Update(done, total);
      return true;
    };
    // An s3:// or hdfs:// output is refused when it exists (without --force) before any work,
    // converted into a private directory, then uploaded.
    auto dest = objstore::TableDestination::Open(args->output, args->force, "convert");
    if (!dest.ok()) return ReportError("convert", dest.status());
    auto result = convert::Convert(args->input, (*dest)->local_path(), o);
    progress.Finish();
    if (!result.ok()) return ReportError("convert", result.status());
    if ((*dest)->is_object()) {
      auto up = PublishWithProgress(**dest, "convert");
      if (!up.ok()) return ReportError("convert", up.status());
    }
    const convert::ConvertStats& s = *result;
    const double mbps = s.seconds > 0 ? static_cast<double>(s.input_bytes) / s.seconds / 1e6 : 0;
    if (s.skipped_bom) {
      std::fprintf(stderr,
                   "embstore convert: skipped the UTF-8 byte order mark (EF BB BF) at the "
                   "start of %s\n",
                   args->input == "-" ? "<stdin>" : args->input.c_str());
    }
    if (!s.format_note.empty()) {
      std::fprintf(stderr, "embstore convert: %s\n", s.format_note.c_str());
    }
    std::printf(
        "%s: %llu rows x %llu %s, %llu bytes, from %s%s (%llu bytes of text) in %.2f s, "
        "%.1f MB/s, %u thread%s, %s kernel%s\n",
        args->output.c_str(), static_cast<unsigned long long>(s.rows),
        static_cast<unsigned long long>(s.dim), std::string(store::DTypeName(s.dtype)).c_str(),
        static_cast<unsigned long long>(s.output_bytes),
        std::string(convert::InputFormatName(s.format)).c_str(), s.gzip ? " (gzip)" : "",
        static_cast<unsigned long long>(s.input_bytes), s.seconds, mbps, s.threads,
        s.threads == 1 ? "" : "s", s.kernel.c_str(),
        s.duplicate_keys > 0
            ? (", " + std::to_string(s.duplicate_keys) + " duplicate keys merged").c_str()
            : "");
    return kExitOk;
  };
}

}  // namespace embstore::cli
