// The converter's driver: input, format sniffing, the parallel chunk pipeline, the ordered writer
// and every user-facing error message. The hot loop lives in the kernels (parse_impl.h).
#include "embstore/store/convert.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "convert/chunker.h"
#include "convert/input.h"
#include "convert/kernel.h"
#include "convert/number.h"
#include "embstore/store/format.h"
#include "embstore/store/writer.h"

namespace embstore::store {

std::string_view InputFormatName(InputFormat f) {
  switch (f) {
    case InputFormat::kAuto: return "auto";
    case InputFormat::kMatrix: return "matrix";
    case InputFormat::kWord2Vec: return "word2vec";
    case InputFormat::kGlove: return "glove";
    case InputFormat::kWord2VecBinary: return "word2vec-binary";
  }
  return "?";
}

std::optional<InputFormat> ParseInputFormat(std::string_view s) {
  for (InputFormat f : {InputFormat::kAuto, InputFormat::kMatrix, InputFormat::kWord2Vec,
                        InputFormat::kGlove, InputFormat::kWord2VecBinary}) {
    if (s == InputFormatName(f)) return f;
  }
  return std::nullopt;
}

std::optional<DuplicateKeyPolicy> ParseDuplicateKeyPolicy(std::string_view s) {
  if (s == "error") return DuplicateKeyPolicy::kError;
  if (s == "first") return DuplicateKeyPolicy::kFirst;
  if (s == "last") return DuplicateKeyPolicy::kLast;
  return std::nullopt;
}

std::string_view ConvertKernelName() { return convert::ActiveKernel().name; }

namespace {

using convert::Chunk;
using convert::Chunker;
using convert::ChunkResult;
using convert::ErrorKind;
using convert::Input;
using convert::Layout;
using convert::ParseParams;

constexpr std::size_t kDefaultChunkBytes = 2u << 20;
constexpr std::size_t kSnippetBytes = 60;

// Quotes text for a message: printable ASCII and valid UTF-8 as is, quotes and backslashes
// escaped, every other byte as \xNN (so a message is always valid UTF-8); cut after about
// kSnippetBytes, never inside a character.
// Whitespace that np.loadtxt (and Python's str.split) separates fields on, but that is neither a
// space nor a tab: \v, \f, the ASCII separators 0x1c-0x1f, and Unicode spaces in UTF-8. Returns
// its length in bytes at s[i] (0 if none) and its name.
std::size_t ExoticSpaceAt(std::string_view s, std::size_t i, const char** name) {
  struct Space {
    const char* bytes;
    const char* name;
  };
  static const Space kSpaces[] = {
      {"\v", "U+000B LINE TABULATION (\\v)"},   {"\f", "U+000C FORM FEED (\\f)"},
      {"\x1c", "U+001C FILE SEPARATOR"},        {"\x1d", "U+001D GROUP SEPARATOR"},
      {"\x1e", "U+001E RECORD SEPARATOR"},      {"\x1f", "U+001F UNIT SEPARATOR"},
      {"\xc2\x85", "U+0085 NEXT LINE"},         {"\xc2\xa0", "U+00A0 NO-BREAK SPACE"},
      {"\xe1\x9a\x80", "U+1680 OGHAM SPACE MARK"}, {"\xe2\x80\xa8", "U+2028 LINE SEPARATOR"},
      {"\xe2\x80\xa9", "U+2029 PARAGRAPH SEPARATOR"},
      {"\xe2\x80\xaf", "U+202F NARROW NO-BREAK SPACE"},
      {"\xe2\x81\x9f", "U+205F MEDIUM MATHEMATICAL SPACE"},
      {"\xe3\x80\x80", "U+3000 IDEOGRAPHIC SPACE"},
  };
  for (const Space& sp : kSpaces) {
    std::string_view b(sp.bytes);
    if (s.substr(i, b.size()) == b) {
      *name = sp.name;
      return b.size();
    }
  }
  // U+2000 .. U+200A: EN QUAD .. HAIR SPACE.
  if (i + 3 <= s.size() && s[i] == '\xe2' && s[i + 1] == '\x80' &&
      static_cast<unsigned char>(s[i + 2]) >= 0x80 && static_cast<unsigned char>(s[i + 2]) <= 0x8a) {
    *name = "a Unicode space (U+2000 to U+200A)";
    return 3;
  }
  return 0;
}

// " (column C holds NAME, which np.loadtxt splits fields on but embstore convert does not: ...)"
// when `line` holds such whitespace, else empty. Added to errors about that line.
std::string ExoticSpaceNote(std::string_view line) {
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char* name = nullptr;
    if (ExoticSpaceAt(line, i, &name) != 0) {
      return "; column " + std::to_string(i + 1) + " holds " + name +
             ", which np.loadtxt treats as a field separator but embstore convert does not "
             "(fields are separated by spaces and tabs, or --delimiter): replace it with a space";
    }
  }
  return "";
}

std::string Quote(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "'";
  std::size_t i = 0;
  while (i < s.size() && i < kSnippetBytes) {
    auto c = static_cast<unsigned char>(s[i]);
    const char* space_name = nullptr;
    if (std::size_t n = ExoticSpaceAt(s, i, &space_name); n > 1) {
      // A Unicode space prints like a space; show its code point instead.
      std::uint32_t cp = n == 2 ? ((c & 0x1f) << 6) | (s[i + 1] & 0x3f)
                                : ((c & 0x0f) << 12) | ((s[i + 1] & 0x3f) << 6) | (s[i + 2] & 0x3f);
      char buf[12];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
      i += n;
      continue;
    }
    if (c >= 0x80) {
      std::size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      std::size_t bad = 0;
      if (i + len <= s.size() && convert::ValidUtf8(s.substr(i, len), &bad)) {
        out.append(s.substr(i, len));
        i += len;
        continue;
      }
    }
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
    ++i;
  }
  out += "'";
  if (i < s.size()) out += "...";
  return out;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// The text of the line that starts at p (without its line break).
std::string_view LineAt(const char* p, const char* end) {
  const char* q = p;
  while (q < end && *q != '\n' && *q != '\r') ++q;
  return {p, static_cast<std::size_t>(q - p)};
}

// Fields of a line split on blanks (or on `delim`, trimmed), ignoring a trailing comment.
std::vector<std::string_view> SplitFields(std::string_view line, char delim,
                                          std::string_view comments) {
  if (!comments.empty()) {
    std::size_t c = line.find(comments);
    if (c != std::string_view::npos) line = line.substr(0, c);
  }
  std::vector<std::string_view> f;
  std::size_t i = 0;
  if (delim == 0) {
    while (i < line.size()) {
      while (i < line.size() && IsBlank(line[i])) ++i;
      std::size_t s = i;
      while (i < line.size() && !IsBlank(line[i])) ++i;
      if (i > s) f.push_back(line.substr(s, i - s));
    }
    return f;
  }
  for (;;) {
    std::size_t e = line.find(delim, i);
    std::string_view field = line.substr(i, e == std::string_view::npos ? e : e - i);
    while (!field.empty() && IsBlank(field.front())) field.remove_prefix(1);
    while (!field.empty() && IsBlank(field.back())) field.remove_suffix(1);
    f.push_back(field);
    if (e == std::string_view::npos) break;
    i = e + 1;
  }
  return f;
}

bool IsNumber(std::string_view s) {
  convert::Decimal d;
  const char* e = convert::ScanNumber(s.data(), s.data() + s.size(), &d);
  return e != nullptr && e == s.data() + s.size();
}

bool ParseU64(std::string_view s, std::uint64_t* v) {
  if (s.empty() || s.size() > 18) return false;
  std::uint64_t x = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    x = x * 10 + static_cast<std::uint64_t>(c - '0');
  }
  *v = x;
  return true;
}

// Maps a mapped chunk's pages in one call before parsing (MADV_POPULATE_READ, Linux 5.14+)
// instead of taking a page fault every few pages; harmless where unsupported.
void Prefault(const Chunk& c) {
#ifdef MADV_POPULATE_READ
  if (c.buffer) return;
  static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<std::uintptr_t>(c.text.begin) & ~(page - 1);
  auto end = reinterpret_cast<std::uintptr_t>(c.text.end);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
#else
  (void)c;
#endif
}

struct Header {
  std::uint64_t count = 0;
  std::uint64_t dim = 0;
  std::uint64_t line = 0;   // 1-based
  std::string text;
};

// The conversion, one object per Convert() call.
class Converter {
 public:
  Converter(const std::string& input, const std::string& output, const ConvertOptions& o)
      : input_path_(input), output_(output), o_(o) {}

  Result<ConvertStats> Run();

 private:
  Status Validate();
  // Consumes skip_rows lines, the header and leading blank/comment lines; decides format and dim.
  Status Prepare();
  Status Sniff(std::string_view first_line, const char* after_first_line);
  Status CreateWriter();
  Status RunTextPipeline();
  Status RunBinary();
  Status ConsumeResult(const Chunk& chunk, ChunkResult& r);
  Status ChunkError(const Chunk& chunk, const ChunkResult& r);
  Status AppendKeyedRows(const ChunkResult& r);
  Status Finish();
  std::string Where(std::uint64_t line, std::uint64_t col) const {
    return in_->display_name() + ":" + std::to_string(line) + ":" + std::to_string(col);
  }
  // Positions in word2vec-binary input, which has no lines: the row (0-based here, 1-based in
  // the message) and the byte offset of its first byte in the (decompressed) input.
  std::string BinaryWhere(std::uint64_t row, std::uint64_t byte) const {
    return in_->display_name() + ": word2vec-binary row " + std::to_string(row + 1) +
           " (byte " + std::to_string(byte) + ")";
  }
  bool ReportProgress() {
    if (!o_.progress) return true;
    std::uint64_t total = in_->stored_size();
    std::uint64_t done = in_->gzip()                                ? in_->consumed()
                         : format_ == InputFormat::kWord2VecBinary ? stats_.input_bytes
                                                                    : chunker_->text_bytes();
    return o_.progress(done, total);
  }

  const std::string input_path_;
  const std::string output_;
  const ConvertOptions& o_;
  std::unique_ptr<Input> in_;
  std::unique_ptr<Chunker> chunker_;
  std::unique_ptr<TableWriter> writer_;
  ConvertStats stats_;
  ParseParams params_;
  InputFormat format_ = InputFormat::kAuto;
  char delimiter_ = 0;
  std::string comments_;
  std::optional<Header> header_;
  std::uint64_t dim_line_ = 0;  // line whose values set the dim
  // The chunk being prepared (its text begins after the consumed preamble).
  Chunk first_;
  bool have_first_ = false;
  std::uint64_t lines_before_ = 0;  // line breaks before the next chunk to consume
  std::uint64_t rows_parsed_ = 0;   // data rows seen (duplicates included)
  // Keys.
  std::deque<std::string> key_arena_;
  std::size_t arena_used_ = 0;
  std::unordered_map<std::string_view, std::uint64_t> key_rows_;
  std::vector<std::uint64_t> row_lines_;  // line of each output row (keyed formats); for
                                          // word2vec-binary its 1-based input row
  // word2vec-binary: byte offset of the first row, input row of the batch's first row, and
  // the byte offset of each row of the batch.
  std::uint64_t binary_start_ = 0;
  std::uint64_t binary_row_first_ = 0;
  std::vector<std::uint64_t> binary_row_offsets_;
  std::vector<std::byte> row_scratch_;
};

Status Converter::Validate() {
  if (o_.delimiter.has_value()) {
    char d = *o_.delimiter;
    if (d == '\n' || d == '\r' || d == '.' || d == '+' || d == '-' || (d >= '0' && d <= '9') ||
        (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '\0') {
      return Status::InvalidArgument(std::string("--delimiter ") + Quote(std::string(1, d)) +
                                     " cannot be used: it can be part of a number or a line "
                                     "break");
    }
    if (!o_.comments.empty() && o_.comments.find(d) != std::string::npos) {
      return Status::InvalidArgument("--delimiter " + Quote(std::string(1, d)) +
                                     " is part of the comment marker " + Quote(o_.comments));
    }
  }
  for (char c : o_.comments) {
    if (c == '\n' || c == '\r') {
      return Status::InvalidArgument("--comments must not contain a line break");
    }
  }
  for (const auto& [k, v] : o_.metadata) {
    if (k.empty() || k.rfind(std::string(kReservedMetaPrefix), 0) == 0) {
      return Status::InvalidArgument("--meta key " + Quote(k) + " is empty or uses the reserved "
                                     "prefix 'embstore.'");
    }
  }
  return Status::OK();
}

Result<ConvertStats> Converter::Run() {
  auto t0 = std::chrono::steady_clock::now();
  EMBSTORE_RETURN_NOT_OK(Validate());
  if (!o_.overwrite) {
    struct stat st {};
    if (::stat(output_.c_str(), &st) == 0) {
      return Status::AlreadyExists("output '" + output_ +
                                   "' already exists; use --force to replace it");
    }
  }
  EMBSTORE_ASSIGN_OR_RETURN(in_, Input::Open(input_path_));
  chunker_ = std::make_unique<Chunker>(in_.get(),
                                       o_.chunk_bytes != 0 ? o_.chunk_bytes : kDefaultChunkBytes);
  comments_ = o_.comments;
  delimiter_ = o_.delimiter.value_or('\0');
  format_ = o_.format;
  EMBSTORE_RETURN_NOT_OK(Prepare());
  stats_.format = format_;
  stats_.dtype = o_.dtype;
  stats_.gzip = in_->gzip();
  stats_.kernel = convert::ActiveKernel().name;
  EMBSTORE_RETURN_NOT_OK(CreateWriter());
  if (format_ == InputFormat::kWord2VecBinary) {
    Status st = RunBinary();
    if (!st.ok() && o_.format == InputFormat::kAuto && st.code() == StatusCode::kCorruption) {
      // Say what was detected and why, so a text file taken for binary is recognizable.
      return Status::Corruption(st.message() + " (" + stats_.format_note +
                                "; use --format if the input is something else)");
    }
    EMBSTORE_RETURN_NOT_OK(st);
  } else {
    EMBSTORE_RETURN_NOT_OK(RunTextPipeline());
  }
  EMBSTORE_RETURN_NOT_OK(Finish());
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats_;
}

Status Converter::Prepare() {
  std::uint64_t to_skip = o_.skip_rows;
  for (;;) {
    EMBSTORE_ASSIGN_OR_RETURN(bool got, chunker_->Next(&first_));
    if (!got) break;
    const char* p = first_.text.begin;
    const char* end = first_.text.end;
    std::uint64_t lines = 0;
    while (to_skip > 0 && p < end) {
      p = convert::NextLineStart(p, end);
      --to_skip;
      ++lines;
    }
    // Leading blank lines never hold the header or data; neither do comment lines, except in
    // word-vector text where a token may start with the comment marker.
    const bool comments_apply = format_ == InputFormat::kMatrix || format_ == InputFormat::kAuto;
    while (p < end) {
      std::string_view line = LineAt(p, end);
      std::size_t i = 0;
      while (i < line.size() && IsBlank(line[i])) ++i;
      const bool blank = i == line.size();
      const bool comment =
          comments_apply && !comments_.empty() && line.substr(i).rfind(comments_, 0) == 0;
      if (!blank && !comment) break;
      p = convert::NextLineStart(p, end);
      ++lines;
    }
    if (p == end) {
      lines_before_ += lines;
      continue;
    }
    lines_before_ += lines;
    std::string_view line = LineAt(p, end);
    const char* after = convert::NextLineStart(p, end);
    first_.text.begin = p;
    EMBSTORE_RETURN_NOT_OK(Sniff(line, after));
    have_first_ = true;
    return Status::OK();
  }
  return Status::Corruption(in_->display_name() +
                            ": no data rows (the input is empty, or has only blank or comment "
                            "lines" + (o_.skip_rows > 0 ? ", or all were skipped)" : ")"));
}

Status Converter::Sniff(std::string_view line, const char* after) {
  const std::uint64_t line_no = lines_before_ + 1;
  const char* end = first_.text.end;
  auto header_fields = SplitFields(line, 0, "");
  std::uint64_t hc = 0;
  std::uint64_t hd = 0;
  const bool looks_header = header_fields.size() == 2 && ParseU64(header_fields[0], &hc) &&
                            ParseU64(header_fields[1], &hd);
  std::string note;

  if (format_ == InputFormat::kAuto) {
    std::string_view next = after < end ? LineAt(after, end) : std::string_view();
    auto next_fields = SplitFields(next, 0, "");
    if (looks_header && hd > 0) {
      // Binary rows hold raw float bytes, where control bytes other than \t \n \r show up at
      // once; text never has them.
      bool binary = false;
      const char* scan_end = after + std::min<std::uint64_t>(
                                         static_cast<std::uint64_t>(end - after), 4 * hd + 256);
      for (const char* q = after; q < scan_end && !binary; ++q) {
        auto c = static_cast<unsigned char>(*q);
        binary = (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
      }
      if (binary) {
        // A binary row starts with a token that ends at a space, before any line break; text
        // with a stray control byte (a NUL in a matrix, say) does not look like that.
        const char* q = after;
        while (q < end && (*q == '\n' || *q == '\r')) ++q;
        const char* tok = q;
        while (q < end && *q != ' ' && *q != '\n' && *q != '\r' &&
               static_cast<unsigned char>(*q) >= 0x20) {
          ++q;
        }
        binary = q < end && *q == ' ' && q > tok;
      }
      // A token followed by numbers: word2vec text, even when the count of numbers disagrees with
      // the header (the parser then says so, naming the line, instead of falling back to matrix).
      bool text_row = next_fields.size() >= 2 && !IsNumber(next_fields[0]);
      for (std::size_t i = 1; text_row && i < next_fields.size(); ++i) {
        text_row = IsNumber(next_fields[i]);
      }
      if (binary) {
        format_ = InputFormat::kWord2VecBinary;
        note = "line " + std::to_string(line_no) + " " + Quote(line) +
               " is a word2vec header and binary rows follow";
      } else if (text_row) {
        format_ = InputFormat::kWord2Vec;
        note = "line " + std::to_string(line_no) + " " + Quote(line) +
               " is a word2vec header and the next line has a token and " + std::to_string(hd) +
               " values";
      } else {
        format_ = InputFormat::kMatrix;
        note = "lines of numbers";
      }
    } else {
      // Fields separated by whitespace that np.loadtxt accepts but this parser does not (\v,
      // U+00A0, ...): say so now, instead of detecting a token and failing on a later line.
      if (delimiter_ == 0) {
        std::string spaced;
        for (std::size_t i = 0; i < line.size();) {
          const char* name = nullptr;
          std::size_t n = ExoticSpaceAt(line, i, &name);
          spaced += n ? ' ' : line[i];
          i += n ? n : 1;
        }
        auto fields = SplitFields(spaced, 0, comments_);
        bool all = spaced != line && !fields.empty();
        for (auto f : fields) all = all && IsNumber(f);
        if (all) {
          return Status::Corruption(Where(line_no, 1) + ": " + Quote(line) +
                                    " is not a row of numbers" + ExoticSpaceNote(line));
        }
      }
      char delim = delimiter_;
      if (delim == 0 && line.find(',') != std::string_view::npos) {
        auto comma = SplitFields(line, ',', comments_);
        bool all = !comma.empty();
        for (auto f : comma) all = all && IsNumber(f);
        if (all) {
          delim = ',';
          delimiter_ = ',';
          note = "matrix with ',' delimiters";
        }
      }
      auto fields = SplitFields(line, delim, comments_);
      bool all_numbers = !fields.empty();
      for (auto f : fields) all_numbers = all_numbers && IsNumber(f);
      bool rest_numbers = fields.size() >= 2 && delim == 0 && !IsNumber(fields[0]);
      for (std::size_t i = 1; rest_numbers && i < fields.size(); ++i) {
        rest_numbers = IsNumber(fields[i]);
      }
      if (!all_numbers && rest_numbers) {
        format_ = InputFormat::kGlove;
        note = "lines start with a token followed by numbers, no header";
      } else {
        format_ = InputFormat::kMatrix;
        if (note.empty()) note = "lines of numbers";
      }
    }
    stats_.format_note = "detected " + std::string(InputFormatName(format_)) + ": " + note;
  }

  if (format_ == InputFormat::kWord2Vec || format_ == InputFormat::kWord2VecBinary) {
    if (!looks_header || hd == 0) {
      return Status::Corruption(Where(line_no, 1) + ": expected a word2vec header 'count dim' "
                                "(two positive integers), found " + Quote(line));
    }
    if (hd > 1000000) {
      return Status::Corruption(Where(line_no, 1) + ": header dim " + std::to_string(hd) +
                                " is implausibly large: " + Quote(line));
    }
    header_ = Header{hc, hd, line_no, std::string(line)};
    stats_.dim = hd;
    dim_line_ = line_no;
    if (format_ == InputFormat::kWord2VecBinary) {
      chunker_->StartRawAfter(first_, after);
      binary_start_ = first_.end_offset - static_cast<std::uint64_t>(first_.text.end - after);
      lines_before_ += 1;
      return Status::OK();
    }
    // The data starts after the header line.
    first_.text.begin = after;
    lines_before_ += 1;
  } else {
    auto fields = SplitFields(line, format_ == InputFormat::kMatrix ? delimiter_ : '\0',
                              format_ == InputFormat::kMatrix ? comments_ : "");
    std::uint64_t n = fields.size();
    if (format_ == InputFormat::kGlove) {
      if (n < 2) {
        return Status::Corruption(Where(line_no, 1) +
                                  ": expected a token followed by values, found " + Quote(line));
      }
      n -= 1;
    }
    if (n == 0 || n > 0xffffffffu) {
      return Status::Corruption(Where(line_no, 1) + ": no values on the first row " +
                                Quote(line));
    }
    stats_.dim = n;
    dim_line_ = line_no;
  }
  return Status::OK();
}

Status Converter::CreateWriter() {
  WriterOptions w;
  w.dtype = o_.dtype;
  w.dim = stats_.dim;
  w.with_keys = format_ != InputFormat::kMatrix;
  w.overwrite = o_.overwrite;
  w.metadata = o_.metadata;
  SourceInfo src;
  src.name = input_path_;
  src.size = in_->stored_size();
  src.mtime_unix = in_->mtime_unix();
  w.source = src;
  EMBSTORE_ASSIGN_OR_RETURN(writer_, TableWriter::Create(output_, w));
  params_.layout = w.with_keys ? Layout::kKeyed : Layout::kMatrix;
  params_.delimiter = format_ == InputFormat::kMatrix ? delimiter_ : '\0';
  params_.comments = format_ == InputFormat::kMatrix ? std::string_view(comments_)
                                                      : std::string_view();
  params_.dim = static_cast<std::uint32_t>(stats_.dim);
  params_.dtype = o_.dtype;
  params_.overflow_is_error = o_.on_overflow == OverflowPolicy::kError;
  return Status::OK();
}

Status Converter::ChunkError(const Chunk& chunk, const ChunkResult& r) {
  const convert::ChunkError& e = r.error;
  const char* base = chunk.text.begin;
  const std::uint64_t line = lines_before_ + e.line + 1;
  const std::uint64_t col = e.offset - e.line_begin + 1;
  const std::string where = Where(line, col);
  std::string_view tok(base + e.offset, e.length);
  std::string_view whole_line = LineAt(base + e.line_begin, chunk.text.end);
  const std::string dim_src = header_ ? "the header on line " + std::to_string(header_->line)
                                      : "the first row, line " + std::to_string(dim_line_);
  switch (e.kind) {
    case ErrorKind::kBadNumber:
      return Status::Corruption(where + ": " + Quote(tok) + " is not a number (line " +
                                Quote(whole_line) + ")" + ExoticSpaceNote(whole_line));
    case ErrorKind::kEmptyField:
      return Status::Corruption(where + ": empty field (expected a number between delimiters) " +
                                "in line " + Quote(whole_line));
    case ErrorKind::kTooFewValues:
    case ErrorKind::kTooManyValues:
      return Status::Corruption(where + ": row has " + std::to_string(e.found) +
                                " values, expected " + std::to_string(stats_.dim) + " (from " +
                                dim_src + "): " + Quote(whole_line) +
                                ExoticSpaceNote(whole_line));
    case ErrorKind::kOverflow:
      return Status::Corruption(where + ": " + Quote(tok) + " is out of range for " +
                                std::string(DTypeName(o_.dtype)) +
                                " (use --on-overflow=inf to store it as infinity)");
    case ErrorKind::kBadKeyUtf8: {
      const char* key_begin = base + e.line_begin;
      while (key_begin < chunk.text.end && IsBlank(*key_begin)) ++key_begin;
      const char* key_end = key_begin;
      while (key_end < chunk.text.end && !IsBlank(*key_end) && *key_end != '\n' &&
             *key_end != '\r') {
        ++key_end;
      }
      return Status::Corruption(where + ": key is not valid UTF-8: " +
                                Quote(std::string_view(key_begin,
                                                       static_cast<std::size_t>(key_end -
                                                                                key_begin))));
    }
    case ErrorKind::kKeyTooLong:
      return Status::Corruption(where + ": key of " + std::to_string(e.length) +
                                " bytes is longer than " + std::to_string(kMaxKeyBytes) + ": " +
                                Quote(tok));
    case ErrorKind::kNone:
      break;
  }
  return Status::Internal("unknown parse error");
}

Status Converter::AppendKeyedRows(const ChunkResult& r) {
  const std::size_t row_bytes = writer_->row_bytes();
  std::vector<std::string_view> new_keys;
  new_keys.reserve(r.rows);
  std::uint64_t run_begin = 0;  // first row of the pending run of new rows
  auto flush = [&](std::uint64_t upto) -> Status {
    if (upto > run_begin) {
      EMBSTORE_RETURN_NOT_OK(writer_->AppendRows(
          std::span<const std::byte>(r.values.data() + run_begin * row_bytes,
                                     (upto - run_begin) * row_bytes)));
      EMBSTORE_RETURN_NOT_OK(writer_->AppendKeys(new_keys));
      new_keys.clear();
    }
    return Status::OK();
  };
  for (std::uint64_t i = 0; i < r.rows; ++i) {
    std::uint32_t kb = i == 0 ? 0 : r.key_ends[i - 1];
    std::string_view key(r.keys.data() + kb, r.key_ends[i] - kb);
    const bool binary = format_ == InputFormat::kWord2VecBinary;
    const std::uint64_t line =
        binary ? binary_row_first_ + r.row_line[i] + 1 : lines_before_ + r.row_line[i] + 1;
    auto it = key_rows_.find(key);
    if (it == key_rows_.end()) {
      // Copy the key into the arena (stable storage for the map's string_views).
      if (key_arena_.empty() || arena_used_ + key.size() > key_arena_.back().size()) {
        key_arena_.emplace_back(std::max<std::size_t>(1u << 20, key.size()), '\0');
        arena_used_ = 0;
      }
      char* dst = key_arena_.back().data() + arena_used_;
      std::memcpy(dst, key.data(), key.size());
      arena_used_ += key.size();
      std::string_view stored(dst, key.size());
      std::uint64_t row = writer_->rows() + (i - run_begin);
      key_rows_.emplace(stored, row);
      row_lines_.push_back(line);
      new_keys.push_back(stored);
      continue;
    }
    // A duplicate: close the pending run first so row numbers stay exact.
    EMBSTORE_RETURN_NOT_OK(flush(i));
    run_begin = i + 1;
    const std::uint64_t first_row = it->second;
    switch (o_.on_duplicate_key) {
      case DuplicateKeyPolicy::kError:
        if (binary) {
          return Status::Corruption(BinaryWhere(line - 1, binary_row_offsets_[i]) +
                                    ": duplicate key " + Quote(key) + " (first at row " +
                                    std::to_string(row_lines_[first_row]) +
                                    "; use --on-duplicate-key=first or last)");
        }
        return Status::Corruption(Where(line, 1) + ": duplicate key " + Quote(key) +
                                  " (first on line " + std::to_string(row_lines_[first_row]) +
                                  "; use --on-duplicate-key=first or last)");
      case DuplicateKeyPolicy::kFirst:
        break;
      case DuplicateKeyPolicy::kLast:
        EMBSTORE_RETURN_NOT_OK(writer_->OverwriteRows(
            first_row, std::span<const std::byte>(r.values.data() + i * row_bytes, row_bytes)));
        break;
    }
    ++stats_.duplicate_keys;
  }
  return flush(r.rows);
}

Status Converter::ConsumeResult(const Chunk& chunk, ChunkResult& r) {
  if (r.error.kind != ErrorKind::kNone) return ChunkError(chunk, r);
  if (params_.layout == Layout::kKeyed) {
    EMBSTORE_RETURN_NOT_OK(AppendKeyedRows(r));
  } else if (r.rows > 0) {
    EMBSTORE_RETURN_NOT_OK(writer_->AppendRows(r.values));
  }
  rows_parsed_ += r.rows;
  lines_before_ += r.lines;
  if (header_ && rows_parsed_ > header_->count) {
    return Status::Corruption(Where(header_->line, 1) + ": the header " + Quote(header_->text) +
                              " says " + std::to_string(header_->count) +
                              " rows, but there are more (line " +
                              std::to_string(lines_before_) + " is past them)");
  }
  stats_.input_bytes = chunk.end_offset;
  if (!chunk.buffer) in_->ReleaseMapped(chunk.end_offset);
  if (!ReportProgress()) return Status::Cancelled("conversion cancelled");
  return Status::OK();
}

Status Converter::RunTextPipeline() {
  const unsigned threads =
      o_.threads != 0 ? o_.threads : std::max(1u, std::thread::hardware_concurrency());
  stats_.threads = threads;
  const convert::Kernel& kernel = convert::ActiveKernel();
  if (threads == 1) {
    ChunkResult r;
    Chunk c = first_;
    bool got = have_first_;
    while (got) {
      r.Clear();
      Prefault(c);
      kernel.parse(c.text, params_, &r);
      EMBSTORE_RETURN_NOT_OK(ConsumeResult(c, r));
      EMBSTORE_ASSIGN_OR_RETURN(got, chunker_->Next(&c));
    }
    return Status::OK();
  }

  // Workers parse chunks in any order; this thread hands them out, consumes results in input
  // order and, while the next result is not ready, parses queued chunks itself. So `threads`
  // threads parse (threads - 1 workers and this one) and none is left idle or oversubscribed.
  // At most `max_inflight` chunks exist at once, which bounds memory.
  struct Slot {
    Chunk chunk;
    ChunkResult result;
    bool ready = false;
  };
  const std::size_t max_inflight = 2 * static_cast<std::size_t>(threads) + 2;
  std::vector<Slot> slots(max_inflight);
  std::mutex mu;
  std::condition_variable work_cv;
  std::condition_variable done_cv;
  std::deque<std::size_t> queue;  // slot indexes to parse
  bool stop = false;

  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (unsigned t = 0; t + 1 < threads; ++t) {
    workers.emplace_back([&] {
      for (;;) {
        std::size_t idx;
        {
          std::unique_lock<std::mutex> lock(mu);
          work_cv.wait(lock, [&] { return stop || !queue.empty(); });
          if (stop) return;
          idx = queue.front();
          queue.pop_front();
        }
        Slot& s = slots[idx];
        s.result.Clear();
        Prefault(s.chunk);
        kernel.parse(s.chunk.text, params_, &s.result);
        {
          std::lock_guard<std::mutex> lock(mu);
          s.ready = true;
        }
        done_cv.notify_all();
      }
    });
  }
  auto shutdown = [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    work_cv.notify_all();
    for (auto& w : workers) w.join();
  };

  Status st;
  std::uint64_t next_read = 0;   // sequence number of the next chunk to read
  std::uint64_t next_write = 0;  // sequence number of the next chunk to consume
  bool eof = !have_first_;
  bool first_pending = have_first_;
  while (st.ok()) {
    while (!eof && next_read - next_write < max_inflight) {
      Slot& s = slots[next_read % max_inflight];
      if (first_pending) {
        s.chunk = first_;
        first_pending = false;
      } else {
        auto got = chunker_->Next(&s.chunk);
        if (!got.ok()) {
          st = got.status();
          break;
        }
        if (!*got) {
          eof = true;
          break;
        }
      }
      s.ready = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        queue.push_back(next_read % max_inflight);
      }
      work_cv.notify_one();
      ++next_read;
    }
    if (!st.ok() || next_write == next_read) break;
    Slot& s = slots[next_write % max_inflight];
    {
      std::unique_lock<std::mutex> lock(mu);
      while (!s.ready) {
        if (queue.empty()) {
          done_cv.wait(lock);
          continue;
        }
        std::size_t idx = queue.front();
        queue.pop_front();
        lock.unlock();
        Slot& mine = slots[idx];
        mine.result.Clear();
        Prefault(mine.chunk);
        kernel.parse(mine.chunk.text, params_, &mine.result);
        lock.lock();
        mine.ready = true;
      }
    }
    st = ConsumeResult(s.chunk, s.result);
    s.chunk = Chunk{};
    ++next_write;
  }
  shutdown();
  return st;
}

Status Converter::RunBinary() {
  stats_.threads = 1;
  const std::uint64_t dim = stats_.dim;
  const std::size_t vec_bytes = static_cast<std::size_t>(dim) * 4;
  const std::size_t row_bytes = writer_->row_bytes();
  // The input after the header is read into `buf` and consumed from `pos`; fill(n) makes n bytes
  // available from pos (fewer only at the end of the input). A refill moves the unread bytes to
  // the front of the buffer, so no pointer into it survives a fill(): rows are copied out of it
  // (key and values) before the next one is read.
  std::vector<char> buf(std::max<std::size_t>(o_.chunk_bytes != 0 ? o_.chunk_bytes : 1u << 20,
                                              64));
  std::size_t have = 0;
  std::size_t pos = 0;
  bool eof = false;
  auto fill = [&](std::size_t need) -> Status {
    if (have - pos >= need || eof) return Status::OK();
    std::memmove(buf.data(), buf.data() + pos, have - pos);
    have -= pos;
    pos = 0;
    if (buf.size() < need) buf.resize(need);
    while (have < need && !eof) {
      EMBSTORE_ASSIGN_OR_RETURN(std::size_t r, chunker_->ReadRaw(buf.data() + have,
                                                                 buf.size() - have));
      if (r == 0) eof = true;
      have += r;
    }
    return Status::OK();
  };
  // Byte offset (in the decompressed input) of buf[pos]; messages name it with the row number.
  std::uint64_t offset = binary_start_;
  auto at = [&](std::uint64_t row, std::uint64_t byte) {
    return BinaryWhere(row, byte);
  };
  std::vector<float> values(dim);
  // Rows are handed to the keyed-row logic (duplicates, key order) in batches of ~4 MiB.
  const std::uint64_t batch_rows =
      std::clamp<std::uint64_t>((4u << 20) / std::max<std::size_t>(row_bytes, 1), 1, 65536);
  ChunkResult r;
  r.values.resize(static_cast<std::size_t>(batch_rows) * row_bytes);
  binary_row_first_ = 0;
  binary_row_offsets_.clear();
  auto flush = [&]() -> Status {
    if (r.rows == 0) return Status::OK();
    EMBSTORE_RETURN_NOT_OK(AppendKeyedRows(r));
    rows_parsed_ += r.rows;
    binary_row_first_ += r.rows;
    r.rows = 0;
    r.keys.clear();
    r.key_ends.clear();
    r.row_line.clear();
    binary_row_offsets_.clear();
    // A mapped input's pages behind this point are not read again (keeps RSS bounded).
    if (!in_->gzip()) in_->ReleaseMapped(offset > 4096 ? offset - 4096 : 0);
    return Status::OK();
  };
  for (std::uint64_t row = 0; row < header_->count; ++row) {
    // gensim skips line breaks before a token; so does the original word2vec writer's reader.
    for (;;) {
      EMBSTORE_RETURN_NOT_OK(fill(1));
      if (pos < have && (buf[pos] == '\n' || buf[pos] == '\r')) {
        ++pos;
        ++offset;
        continue;
      }
      break;
    }
    const std::uint64_t row_offset = offset;
    // The token runs to the first space; look for it in what the buffer holds, reading more
    // until it shows up (a token is at most kMaxKeyBytes bytes).
    std::size_t key_len = 0;
    for (;;) {
      const void* sp = std::memchr(buf.data() + pos + key_len, ' ', have - pos - key_len);
      if (sp != nullptr) {
        key_len = static_cast<std::size_t>(static_cast<const char*>(sp) - (buf.data() + pos));
        break;
      }
      key_len = have - pos;
      if (key_len > kMaxKeyBytes) break;
      if (eof) break;
      EMBSTORE_RETURN_NOT_OK(fill(key_len + 1));
    }
    if (key_len > kMaxKeyBytes) {
      return Status::Corruption(at(row, row_offset) + ": no space after a token of " +
                                std::to_string(kMaxKeyBytes) + " bytes: " +
                                Quote(std::string_view(buf.data() + pos, 40)) +
                                " (keys may not be longer; is the header's dim right?)");
    }
    if (pos + key_len >= have) {
      return Status::Corruption(at(row, row_offset) + ": the file ends inside the token" +
                                (key_len ? " " + Quote(std::string_view(buf.data() + pos,
                                                                        key_len))
                                         : std::string()) +
                                "; the header " + Quote(header_->text) + " announces " +
                                std::to_string(header_->count) +
                                " rows (header count too large, or the file is truncated)");
    }
    EMBSTORE_RETURN_NOT_OK(fill(key_len + 1 + vec_bytes));
    // Only now, after the last fill of this row, may views into the buffer be taken.
    const std::string_view key(buf.data() + pos, key_len);
    std::size_t bad = 0;
    if (key_len == 0 || !convert::ValidUtf8(key, &bad)) {
      return Status::Corruption(at(row, row_offset) + ": key " +
                                (key_len == 0 ? "is empty" : "is not valid UTF-8: ") +
                                (key_len == 0 ? "" : Quote(key)));
    }
    if (have - pos < key_len + 1 + vec_bytes) {
      return Status::Corruption(at(row, row_offset) + " " + Quote(key) + ": expected " +
                                std::to_string(vec_bytes) + " bytes of values (" +
                                std::to_string(dim) + " float32), the file ends after " +
                                std::to_string(have - pos - key_len - 1));
    }
    const char* vec = buf.data() + pos + key_len + 1;
    std::byte* dst = r.values.data() + static_cast<std::size_t>(r.rows) * row_bytes;
    if (o_.dtype == DType::kF32) {
      std::memcpy(dst, vec, vec_bytes);
    } else {
      std::memcpy(values.data(), vec, vec_bytes);
      auto over = ConvertFromF32(o_.dtype, values, std::span<std::byte>(dst, row_bytes),
                                 o_.on_overflow);
      if (over.has_value()) {
        return Status::Corruption(at(row, row_offset) + " " + Quote(key) + ", value " +
                                  std::to_string(*over + 1) + " (" +
                                  std::to_string(values[*over]) + ") is out of range for " +
                                  std::string(DTypeName(o_.dtype)) +
                                  " (use --on-overflow=inf to store it as infinity)");
      }
    }
    r.keys.append(key.data(), key.size());
    r.key_ends.push_back(static_cast<std::uint32_t>(r.keys.size()));
    r.row_line.push_back(static_cast<std::uint32_t>(r.rows));
    binary_row_offsets_.push_back(row_offset);
    ++r.rows;
    pos += key_len + 1 + vec_bytes;
    offset += key_len + 1 + vec_bytes;
    stats_.input_bytes = offset;
    if (r.rows == batch_rows) {
      EMBSTORE_RETURN_NOT_OK(flush());
      if (!ReportProgress()) return Status::Cancelled("conversion cancelled");
    }
  }
  EMBSTORE_RETURN_NOT_OK(flush());
  // Only line breaks may follow the last row.
  for (;;) {
    EMBSTORE_RETURN_NOT_OK(fill(1));
    if (pos >= have) break;
    if (buf[pos] != '\n' && buf[pos] != '\r') {
      return Status::Corruption(in_->display_name() + ": byte " + std::to_string(offset) +
                                ": word2vec-binary data continues after the " +
                                std::to_string(header_->count) + " rows the header " +
                                Quote(header_->text) + " announces");
    }
    ++pos;
    ++offset;
  }
  stats_.input_bytes = offset;
  return Status::OK();
}

Status Converter::Finish() {
  if (rows_parsed_ == 0) {
    return Status::Corruption(in_->display_name() + ": no data rows" +
                              (header_ ? " after the header on line " +
                                             std::to_string(header_->line)
                                       : std::string()));
  }
  if (header_ && rows_parsed_ != header_->count) {
    return Status::Corruption(Where(header_->line, 1) + ": the header " + Quote(header_->text) +
                              " says " + std::to_string(header_->count) + " rows, found " +
                              std::to_string(rows_parsed_));
  }
  EMBSTORE_RETURN_NOT_OK(writer_->Finish());
  stats_.rows = writer_->rows();
  struct stat st {};
  if (::stat(output_.c_str(), &st) == 0) {
    stats_.output_bytes = static_cast<std::uint64_t>(st.st_size);
  }
  return Status::OK();
}

}  // namespace

Result<ConvertStats> Convert(const std::string& input, const std::string& output,
                             const ConvertOptions& options) {
  Converter c(input, output, options);
  return c.Run();
}

}  // namespace embstore::store
