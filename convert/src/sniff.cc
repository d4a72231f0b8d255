// Format sniffing: skips the preamble (skip_rows, blank and comment lines), reads the first
// line and decides the format, the dim and, for word2vec, the header.
#include <algorithm>

#include "converter.h"
#include "decimal.h"
#include "kernel_common.h"
#include "messages.h"

namespace embstore::convert {
namespace {

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
  Decimal d;
  const char* e = ScanNumber(s.data(), s.data() + s.size(), &d);
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

// Files that are not embeddings as text at all, told by their first bytes. Parsing one would only
// say that its first bytes are not a number.
const char* KnownBinaryFile(std::string_view head) {
  struct Magic {
    std::string_view bytes;
    const char* what;
  };
  static const Magic kMagics[] = {
      // fastText's model files start with the int32 793712314, little-endian.
      {std::string_view("\xba\x16\x4f\x2f", 4),
       "a fastText model (.bin), not word vectors: convert the .vec file fastText writes beside "
       "it, or write one with `fasttext print-word-vectors` or gensim's save_word2vec_format"},
      {"\x93NUMPY",
       "a NumPy .npy file, not text: write it as text with np.savetxt(path, array, fmt='%.9g')"},
      {"PK\x03\x04",
       "a zip archive (an .npz, a PyTorch checkpoint, a Keras file...), not text: save the "
       "array as text with np.savetxt(path, array, fmt='%.9g')"},
      {"\x89HDF\r\n\x1a\n", "an HDF5 file, not text: read the array with h5py and save it as text "
       "with np.savetxt(path, array, fmt='%.9g')"},
  };
  for (const Magic& m : kMagics) {
    if (head.substr(0, m.bytes.size()) == m.bytes) return m.what;
  }
  // A pickle (protocol 2 and later: 0x80, then the protocol number).
  if (head.size() >= 2 && head[0] == '\x80' && head[1] >= 2 && head[1] <= 5) {
    return "a Python pickle (a gensim or PyTorch model?), not text: save the vectors as "
           "word2vec text (gensim's save_word2vec_format) or the array with np.savetxt";
  }
  // A safetensors file (an embstore table is one): an 8-byte little-endian header length, then
  // the JSON header.
  if (head.size() >= 10 && head.substr(8, 2) == "{\"" && head[6] == 0 && head[7] == 0) {
    return "a safetensors file (perhaps already an embstore table: `embstore inspect` it), not "
           "text";
  }
  return nullptr;
}

// What the first lines after the header (or after the first line) look like, for format
// sniffing: at most kSniffLines lines of the first chunk, blank lines skipped.
struct LineSample {
  std::uint64_t lines = 0;            // lines looked at
  bool same_width = true;             // all of them have `width` fields
  std::uint64_t width = 0;            // fields of the first of them
  std::uint64_t token_lines = 0;      // lines whose first field is not a number and the rest are
  std::uint64_t token_line = 0;       // the first of them, counted in lines (blank ones too)
                                      // from 1, the first line of the sample
  std::string_view token;             // that line's token
};

constexpr std::uint64_t kSniffLines = 1000;

LineSample SampleLines(const char* p, const char* end) {
  LineSample s;
  std::uint64_t physical = 0;
  while (p < end && s.lines < kSniffLines) {
    std::string_view line = LineAt(p, end);
    p = NextLineStart(p, end);
    ++physical;
    auto fields = SplitFields(line, 0, "");
    if (fields.empty()) continue;
    ++s.lines;
    if (s.lines == 1) s.width = fields.size();
    if (fields.size() != s.width) s.same_width = false;
    if (fields.size() >= 2 && !IsNumber(fields[0])) {
      bool rest = true;
      for (std::size_t i = 1; rest && i < fields.size(); ++i) rest = IsNumber(fields[i]);
      if (rest && ++s.token_lines == 1) {
        s.token_line = physical;
        s.token = fields[0];
      }
    }
  }
  return s;
}

}  // namespace

Status Converter::Prepare() {
  std::uint64_t to_skip = o_.skip_rows;
  for (;;) {
    EMBSTORE_ASSIGN_OR_RETURN(bool got, chunker_->Next(&first_));
    if (!got) break;
    const char* p = first_.text.begin;
    const char* end = first_.text.end;
    if (first_.end_offset == static_cast<std::uint64_t>(end - p)) {
      // The start of the input.
      if (const char* what = KnownBinaryFile(std::string_view(p, static_cast<std::size_t>(end - p)))) {
        return Status::Corruption(in_->display_name() + " is " + what);
      }
      // A UTF-8 byte order mark (what many Windows tools write first) is not part of the text,
      // as for np.loadtxt(encoding='utf-8-sig'). Columns of line 1 count from after it, as
      // editors show them.
      if (end - p >= 3 && std::string_view(p, 3) == "\xef\xbb\xbf") {
        p += 3;
        stats_.skipped_bom = true;
      }
    }
    std::uint64_t lines = 0;
    while (to_skip > 0 && p < end) {
      p = NextLineStart(p, end);
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
      p = NextLineStart(p, end);
      ++lines;
    }
    if (p == end) {
      lines_before_ += lines;
      continue;
    }
    lines_before_ += lines;
    std::string_view line = LineAt(p, end);
    const char* after = NextLineStart(p, end);
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
      // Rows of a token and hd values: word2vec text, whatever the tokens look like (a vocabulary
      // sorted by token starts with "000", "1", "2010"...). A matrix has the same number of
      // fields on every line, so one whose first line is "N D" cannot have D + 1 on the next,
      // unless D is 1: then only a token that is not a number tells. Rows of a token and another
      // count of numbers are word2vec too (the parser then names the line, instead of falling
      // back to matrix).
      bool rows_fit = next_fields.size() == hd + 1;
      for (std::size_t i = 1; rows_fit && i < next_fields.size(); ++i) {
        rows_fit = IsNumber(next_fields[i]);
      }
      bool text_row = next_fields.size() >= 2 && !IsNumber(next_fields[0]);
      for (std::size_t i = 1; text_row && i < next_fields.size(); ++i) {
        text_row = IsNumber(next_fields[i]);
      }
      if (binary) {
        format_ = InputFormat::kWord2VecBinary;
        note = "line " + std::to_string(line_no) + " " + Quote(line) +
               " is a word2vec header and binary rows follow";
      } else if (text_row ||
                 (rows_fit && (hd != 1 || SampleLines(after, end).token_line != 0))) {
        format_ = InputFormat::kWord2Vec;
        note = "line " + std::to_string(line_no) + " " + Quote(line) +
               " is a word2vec header and the next line has a token and " +
               std::to_string(next_fields.size() - 1) + " values";
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
      // A vocabulary may start with tokens that are numbers ("000", "1", "2010"). The lines after
      // the first (up to kSniffLines) tell: in GloVe, rows of the same width that start with a
      // word are most of them; a matrix with a stray word in its first column is still a matrix
      // (and its parse error names the line), never a table of keys made from its first column.
      LineSample sample;
      if (all_numbers && delim == 0 && fields.size() >= 2) sample = SampleLines(after, end);
      const bool later_token = sample.token_lines * 4 >= sample.lines && sample.token_lines > 0 &&
                               sample.same_width && sample.width == fields.size();
      if (!all_numbers && rest_numbers) {
        format_ = InputFormat::kGlove;
        note = "lines start with a token followed by numbers, no header";
      } else if (later_token) {
        format_ = InputFormat::kGlove;
        note = "lines start with a token followed by numbers, no header (" +
               std::to_string(sample.token_lines) + " of the next " +
               std::to_string(sample.lines) + " lines start with a word, the first on line " +
               std::to_string(line_no + sample.token_line) + ": " + Quote(sample.token) +
               "; line " + std::to_string(line_no) + "'s token is a number)";
      } else {
        format_ = InputFormat::kMatrix;
        if (note.empty()) {
          const std::uint64_t seen = 1 + sample.lines;
          note = "lines of numbers" +
                 (seen > 1 ? " (the first " + std::to_string(seen) + " lines)" : std::string());
        }
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
}  // namespace embstore::convert
