// The converter's driver (private to convert/): one Converter object per Convert() call.
#ifndef EMBSTORE_CONVERT_SRC_CONVERTER_H_
#define EMBSTORE_CONVERT_SRC_CONVERTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chunker.h"
#include "embstore/convert/convert.h"
#include "embstore/convert/parse_kernels.h"
#include "embstore/store/writer.h"
#include "input.h"

namespace embstore::convert {

using store::TableWriter;

struct Header {
  std::uint64_t count = 0;
  std::uint64_t dim = 0;
  std::uint64_t line = 0;   // 1-based
  std::string text;
};
// The conversion, one object per Convert() call. Its parts live in convert.cc (options, writer,
// keyed rows, finish), sniff.cc (preamble and format detection), text.cc (the parallel chunk
// pipeline and parse errors) and binary.cc (word2vec-binary).
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
  // Keys. The writer finds repeated keys (WriterOptions::on_duplicate_key); under kError the
  // converter keeps the line of each output row (for word2vec-binary its 1-based input row) to
  // name both places in the message.
  std::vector<std::string_view> batch_keys_;
  std::vector<std::uint64_t> row_lines_;
  // word2vec-binary: byte offset of the first row, input row of the batch's first row, and
  // the byte offset of each row of the batch.
  std::uint64_t binary_start_ = 0;
  std::uint64_t binary_row_first_ = 0;
  std::vector<std::uint64_t> binary_row_offsets_;
  std::vector<std::byte> row_scratch_;
};

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_CONVERTER_H_
