// Chunk parsing kernels of the converter. Public for the parser benchmarks and tests only; the
// converter's API is convert.h.
//
// A parse kernel parses one chunk of whole lines of text into encoded rows. It is a plain function
// over a byte range that fills a plain result struct; positions of errors are offsets into the
// chunk, and the caller (text.cc) turns them into file:line:column messages.
//
// The same generic algorithm (parse_impl.h) is compiled once per SIMD level: scalar (the
// reference), avx2 and avx512. The level is store/simd.h's ActiveIsa(), the one probe and override
// rule (EMBSTORE_FORCE_KERNEL) shared with the dtype kernels; tests check every level against
// scalar.
#ifndef EMBSTORE_CONVERT_PARSE_KERNELS_H_
#define EMBSTORE_CONVERT_PARSE_KERNELS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "embstore/store/dtype.h"
#include "embstore/store/format.h"

namespace embstore::convert {

using store::DType;
using store::kMaxKeyBytes;

enum class Layout : std::uint8_t {
  kMatrix,  // values only
  kKeyed,   // a token, then the values (word2vec text, glove)
};

struct ParseParams {
  Layout layout = Layout::kMatrix;
  char delimiter = 0;         // 0: runs of spaces and tabs
  std::string_view comments;  // empty: no comments
  std::uint32_t dim = 0;      // values per row, > 0
  DType dtype = DType::kF32;
  bool overflow_is_error = true;
};

enum class ErrorKind : std::uint8_t {
  kNone,
  kBadNumber,      // [offset, offset+length) is not a number
  kEmptyField,     // an empty field between delimiters at offset
  kTooFewValues,   // the row ends at offset with `found` values
  kTooManyValues,  // an extra value starts at offset; the row has `found` values
  kOverflow,       // [offset, offset+length) is finite but rounds to infinity
  kBadKeyUtf8,     // the key at [offset, offset+length) is not valid UTF-8
  kKeyTooLong,     // the key at [offset, offset+length) is longer than kMaxKeyBytes
};

struct ChunkError {
  ErrorKind kind = ErrorKind::kNone;
  std::uint64_t line = 0;      // 0-based line within the chunk
  std::size_t line_begin = 0;  // chunk offset of that line's first byte
  std::size_t offset = 0;      // chunk offset of the offending text
  std::size_t length = 0;
  std::uint64_t found = 0;
};

// Leaves elements uninitialized when a vector grows: kernels overwrite every byte they append,
// and zero-filling the 480 MB of values of the seed file first cost a few percent of the run.
template <class T>
struct UninitializedAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <class U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;  // default-initialization: no value is written
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

struct ChunkResult {
  // rows * dim values in the target dtype, little-endian
  std::vector<std::byte, UninitializedAllocator<std::byte>> values;
  std::uint64_t rows = 0;
  std::uint64_t lines = 0;              // line breaks consumed
  std::string keys;                     // keyed layout: the keys, concatenated
  std::vector<std::uint32_t> key_ends;  // end offset in `keys` of each row's key
  std::vector<std::uint32_t> row_line;  // keyed layout: 0-based chunk line of each row
  ChunkError error;

  void Clear() {
    values.clear();
    rows = 0;
    lines = 0;
    keys.clear();
    key_ends.clear();
    row_line.clear();
    error = ChunkError{};
  }
};

// The text to parse: [begin, end) holds whole lines (the last may lack its line break). Kernels
// may read, but never use, bytes in [readable_begin, readable_end) outside it.
struct ChunkText {
  const char* begin;
  const char* end;
  const char* readable_begin;
  const char* readable_end;
};

using ParseChunkFn = void (*)(const ChunkText& text, const ParseParams& params, ChunkResult* out);

struct ParseKernel {
  const char* name;
  ParseChunkFn parse;
};

// The parse kernel of simd::ActiveIsa(). Thread-safe.
const ParseKernel& ActiveParseKernel();
// The parse kernel of every level this CPU runs, scalar first.
std::vector<const ParseKernel*> SupportedParseKernels();

// Per-ISA entry points (parse_*.cc): the x86-64 ones in x86-64 builds, the NEON one in aarch64
// builds.
void ParseChunkScalar(const ChunkText& text, const ParseParams& params, ChunkResult* out);
#if defined(__x86_64__)
void ParseChunkAvx2(const ChunkText& text, const ParseParams& params, ChunkResult* out);
void ParseChunkAvx512(const ChunkText& text, const ParseParams& params, ChunkResult* out);
#elif defined(__aarch64__)
void ParseChunkNeon(const ChunkText& text, const ParseParams& params, ChunkResult* out);
#endif

// True when [p, end) is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF);
// otherwise stores the offset of the first bad byte.
bool ValidUtf8(std::string_view s, std::size_t* bad_offset);

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_PARSE_KERNELS_H_
