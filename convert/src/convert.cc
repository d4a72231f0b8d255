// The converter's driver: options, the output writer, keyed rows and the end of a conversion.
// Sniffing is in sniff.cc, the parallel text pipeline in text.cc, word2vec binary in binary.cc;
// the hot loop lives in the kernels (parse_impl.h).
#include "embstore/convert/convert.h"

#include <sys/stat.h>

#include <chrono>
#include <span>

#include "converter.h"
#include "embstore/store/format.h"
#include "messages.h"

namespace embstore::convert {

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


namespace {
constexpr std::size_t kDefaultChunkBytes = 2u << 20;
}  // namespace

Status Converter::Validate() {
  if (o_.delimiter.has_value()) {
    char d = *o_.delimiter;
    if (d == '\n' || d == '\r' || d == '.' || d == '+' || d == '-' || (d >= '0' && d <= '9') ||
        (d >= 'a' && d <= 'z') || (d >= 'A' && d <= 'Z') || d == '\0') {
      return Status::InvalidArgument(std::string("`delimiter` ") + Quote(std::string(1, d)) +
                                     " cannot be used: it can be part of a number or a line "
                                     "break");
    }
    if (!o_.comments.empty() && o_.comments.find(d) != std::string::npos) {
      return Status::InvalidArgument("`delimiter` " + Quote(std::string(1, d)) +
                                     " is part of the comment marker " + Quote(o_.comments));
    }
  }
  for (char c : o_.comments) {
    if (c == '\n' || c == '\r') {
      return Status::InvalidArgument("`comments` must not contain a line break");
    }
  }
  for (const auto& [k, v] : o_.metadata) {
    if (k.empty() || k.rfind(std::string(store::kReservedMetaPrefix), 0) == 0) {
      return Status::InvalidArgument("`metadata` key " + Quote(k) + " is empty or uses the reserved "
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
                                   "' already exists; use `overwrite` to replace it");
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
  stats_.kernel = ActiveParseKernel().name;
  EMBSTORE_RETURN_NOT_OK(CreateWriter());
  if (format_ == InputFormat::kWord2VecBinary) {
    Status st = RunBinary();
    if (!st.ok() && o_.format == InputFormat::kAuto && st.code() == StatusCode::kCorruption) {
      // Say what was detected and why, so a text file taken for binary is recognizable.
      return Status::Corruption(st.message() + " (" + stats_.format_note +
                                "; use `format` if the input is something else)");
    }
    EMBSTORE_RETURN_NOT_OK(st);
  } else {
    Status st = RunTextPipeline();
    if (!st.ok() && o_.format == InputFormat::kAuto && st.code() == StatusCode::kCorruption) {
      // A word file whose first tokens are numbers may have been taken for a matrix, a matrix
      // with words for GloVe: say what was detected and why.
      return Status::Corruption(st.message() + " (" + stats_.format_note +
                                "; use `format` if the input is something else)");
    }
    EMBSTORE_RETURN_NOT_OK(st);
  }
  EMBSTORE_RETURN_NOT_OK(Finish());
  stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats_;
}
Status Converter::CreateWriter() {
  store::WriterOptions w;
  w.dtype = o_.dtype;
  w.dim = stats_.dim;
  w.with_keys = format_ != InputFormat::kMatrix;
  w.overwrite = o_.overwrite;
  w.metadata = o_.metadata;
  w.on_duplicate_key = o_.on_duplicate_key;
  store::SourceInfo src;
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
Status Converter::AppendKeyedRows(const ChunkResult& r) {
  const bool binary = format_ == InputFormat::kWord2VecBinary;
  auto line_of = [&](std::uint64_t i) {
    return (binary ? binary_row_first_ : lines_before_) + r.row_line[i] + 1;
  };
  batch_keys_.clear();
  for (std::uint64_t i = 0; i < r.rows; ++i) {
    std::uint32_t kb = i == 0 ? 0 : r.key_ends[i - 1];
    batch_keys_.emplace_back(r.keys.data() + kb, r.key_ends[i] - kb);
  }
  EMBSTORE_ASSIGN_OR_RETURN(
      TableWriter::KeyedAppend appended,
      writer_->AppendKeyedRows(std::span<const std::byte>(r.values.data(),
                                                          r.rows * writer_->row_bytes()),
                               batch_keys_));
  stats_.duplicate_keys += appended.duplicates;
  if (o_.on_duplicate_key != DuplicateKeyPolicy::kError) return Status::OK();
  const std::uint64_t accepted = appended.refused ? appended.refused->index : r.rows;
  for (std::uint64_t i = 0; i < accepted; ++i) row_lines_.push_back(line_of(i));
  if (!appended.refused) return Status::OK();
  const std::size_t i = appended.refused->index;
  const std::string_view key = batch_keys_[i];
  const std::uint64_t first = row_lines_[appended.refused->first_row];
  if (binary) {
    return Status::Corruption(BinaryWhere(line_of(i) - 1, binary_row_offsets_[i]) +
                              ": duplicate key " + Quote(key) + " (first at row " +
                              std::to_string(first) + "; use `on_duplicate_key` first or last)");
  }
  return Status::Corruption(Where(line_of(i), 1) + ": duplicate key " + Quote(key) +
                            " (first on line " + std::to_string(first) +
                            "; use `on_duplicate_key` first or last)");
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

Result<ConvertStats> Convert(const std::string& input, const std::string& output,
                             const ConvertOptions& options) {
  Converter c(input, output, options);
  return c.Run();
}

}  // namespace embstore::convert
