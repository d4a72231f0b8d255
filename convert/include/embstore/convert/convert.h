// Convert: turns a text embedding file (or word2vec binary) into a table file (docs/FORMAT.md).
//
// Input formats (docs/CONVERT.md is the reference):
//   matrix           what np.savetxt writes and np.loadtxt reads: one row a line, values split by
//                    whitespace or by one delimiter character, '#' comments, blank lines.
//   word2vec         a "count dim" line, then "token v1 ... vdim" lines (fastText .vec as well).
//   glove            "token v1 ... vdim" lines, no header.
//   word2vec-binary  a "count dim" line, then per row: token, one space, dim little-endian f32.
//   auto             sniffs the first lines and picks one of the above (ConvertStats::format).
// The input is a regular file, "-" for standard input, or either of them gzip-compressed
// (detected by its magic bytes).
//
// Values are rounded once, correctly, from the decimal text to the target dtype: for F32 the result
// equals glibc strtof() bit for bit; F16 and BF16 are rounded from the exact decimal value as well
// (no double rounding through f32). Tokens become the table's keys, in file order.
//
// The input is cut at line boundaries into chunks that worker threads parse in parallel; an
// ordered writer appends their rows to a TableWriter, so memory stays bounded by a fixed number of
// chunks in flight whatever the input size, and the output does not depend on the thread count.
//
// Errors: bad input yields a Corruption status whose message names file:line:column and quotes
// the offending text; usage errors (bad option values) are InvalidArgument; an existing output
// without `overwrite` is AlreadyExists. On any error no output file (and no temporary) is left
// behind, and an existing output is left untouched.
//
// Thread safety: Convert() may run concurrently for different outputs; `progress` is called from
// the calling thread only.
#ifndef EMBSTORE_CONVERT_CONVERT_H_
#define EMBSTORE_CONVERT_CONVERT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "embstore/common/status.h"
#include "embstore/store/dtype.h"
#include "embstore/store/table.h"
#include "embstore/store/writer.h"

namespace embstore::convert {

using store::DType;
using store::DuplicateKeyPolicy;  // the writer owns the policy (store::TableWriter)
using store::OverflowPolicy;
using store::ProgressFn;

enum class InputFormat { kAuto, kMatrix, kWord2Vec, kGlove, kWord2VecBinary };

// "auto", "matrix", "word2vec", "glove", "word2vec-binary".
std::string_view InputFormatName(InputFormat f);
std::optional<InputFormat> ParseInputFormat(std::string_view s);

// What to do when a key appears a second time (store::DuplicateKeyPolicy): "error" (fail, naming
// both lines), "first" (keep the first row), "last" (the first row's position, the last row's
// values).
std::optional<DuplicateKeyPolicy> ParseDuplicateKeyPolicy(std::string_view s);

struct ConvertOptions {
  InputFormat format = InputFormat::kAuto;
  DType dtype = DType::kF32;
  // Field separator for matrix text: nullopt means runs of spaces and tabs; otherwise one
  // character (not a digit, sign, '.', letter, newline or part of `comments`), with spaces and
  // tabs around each field trimmed. Word-vector text always splits on spaces and tabs.
  std::optional<char> delimiter;
  // Comment marker: from it to the end of the line is ignored (whole lines and trailing). Empty
  // disables comments.
  std::string comments = "#";
  // Lines skipped at the start of the input, comment lines included (like np.loadtxt skiprows).
  std::uint64_t skip_rows = 0;
  // Worker threads; 0 uses every core.
  unsigned threads = 0;
  // Replace an existing output (atomically, on success only).
  bool overwrite = false;
  // A finite decimal that rounds to infinity in the target dtype: error, or store +/-inf.
  OverflowPolicy on_overflow = OverflowPolicy::kError;
  DuplicateKeyPolicy on_duplicate_key = DuplicateKeyPolicy::kError;
  // User metadata, stored verbatim (keys must not start with "embstore.").
  std::map<std::string, std::string> metadata;
  // Called now and then with input bytes consumed and the input size (0 when unknown, e.g. for
  // stdin or gzip). Returning false cancels the conversion (Cancelled status, no output).
  ProgressFn progress;
  // Input bytes per parallel chunk; 0 picks the default. Tests use small chunks to exercise
  // chunk boundaries.
  std::size_t chunk_bytes = 0;
};

struct ConvertStats {
  InputFormat format = InputFormat::kAuto;  // the format parsed (never kAuto)
  std::string format_note;                  // how auto-detection decided, or empty
  bool skipped_bom = false;                 // the input started with a UTF-8 byte order mark
  std::uint64_t rows = 0;
  std::uint64_t dim = 0;
  DType dtype = DType::kF32;
  std::uint64_t input_bytes = 0;    // bytes of (decompressed) text read
  std::uint64_t output_bytes = 0;   // size of the table file
  std::uint64_t duplicate_keys = 0; // rows dropped or merged under kFirst/kLast
  double seconds = 0;
  unsigned threads = 0;
  bool gzip = false;
  std::string kernel;               // SIMD level of the parse kernels: "avx512", "avx2",
                                    // "neon" or "scalar" (store/simd.h)
};

// Converts `input` ("-" for stdin) into a table file at `output`.
Result<ConvertStats> Convert(const std::string& input, const std::string& output,
                             const ConvertOptions& options);

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_CONVERT_H_
