// Cuts the converter's input text into chunks of whole lines (private).
//
// A mapped input is sliced in place; a stream (stdin, gzip) is read into padded buffers, and the
// partial line at the end of each buffer is carried into the next one. A chunk never splits a
// "\r\n" pair, so each chunk's line breaks are counted on their own.
#ifndef EMBSTORE_CONVERT_SRC_CHUNKER_H_
#define EMBSTORE_CONVERT_SRC_CHUNKER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "input.h"
#include "embstore/convert/parse_kernels.h"
#include "embstore/common/status.h"

namespace embstore::convert {

// Bytes of zeros around every owned buffer, so kernels may load whole SIMD blocks near its edges.
inline constexpr std::size_t kPadding = 128;
// The first chunk holds at least this much text whatever the chunk size, so format sniffing sees
// the same lines however the input is cut (converter.h, kSniffLines).
inline constexpr std::size_t kMinFirstChunkBytes = 1u << 20;

struct Chunk {
  std::shared_ptr<std::vector<char>> buffer;  // owns the text for streams; null when mapped
  ChunkText text{};
  std::uint64_t end_offset = 0;               // text bytes up to the end of this chunk
};

class Chunker {
 public:
  Chunker(Input* input, std::size_t chunk_bytes) : in_(input), chunk_bytes_(chunk_bytes) {}

  // The next chunk; false at the end of the input.
  Result<bool> Next(Chunk* out);

  // Switches to raw bytes: after chunk `c` was consumed up to `from` (a pointer into it), Read()
  // returns every byte that remains, in order (word2vec-binary reads its rows this way).
  void StartRawAfter(const Chunk& c, const char* from);
  // Reads up to n raw bytes (fewer only at the end of the input).
  Result<std::size_t> ReadRaw(char* dst, std::size_t n);

  std::uint64_t text_bytes() const { return offset_; }

 private:
  Result<std::size_t> Fill(std::vector<char>* buf, std::size_t from, std::size_t to);
  // Text bytes the next chunk aims for.
  std::size_t NextSize() const {
    return offset_ == 0 ? std::max(chunk_bytes_, kMinFirstChunkBytes) : chunk_bytes_;
  }

  Input* in_;
  std::size_t chunk_bytes_;
  std::uint64_t offset_ = 0;  // text bytes handed out
  std::string carry_;         // streams: the partial line after the last chunk
  bool eof_ = false;
  // Raw mode.
  std::shared_ptr<std::vector<char>> raw_hold_;
  const char* raw_p_ = nullptr;
  const char* raw_end_ = nullptr;
  std::uint64_t mapped_pos_ = 0;
};

// Offset just past the line break that ends the line containing p, or `end` (handles \n, \r\n, \r).
const char* NextLineStart(const char* p, const char* end);

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_CHUNKER_H_
