// Input of the converter (private): a plain file (memory-mapped), standard input, or either of
// them gzip-compressed (detected by the magic bytes 1f 8b and inflated with zlib, streaming).
#ifndef EMBSTORE_CONVERT_SRC_INPUT_H_
#define EMBSTORE_CONVERT_SRC_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore::convert {

class Input {
 public:
  // `path` "-" reads standard input.
  static Result<std::unique_ptr<Input>> Open(const std::string& path);
  virtual ~Input() = default;

  // The name used in messages: the path, or "<stdin>".
  const std::string& display_name() const { return display_name_; }
  // Size of the file as stored (compressed size for gzip); 0 for pipes.
  std::uint64_t stored_size() const { return stored_size_; }
  std::int64_t mtime_unix() const { return mtime_unix_; }
  bool gzip() const { return gzip_; }

  // The whole (uncompressed) text when the input is a mapped plain file, else empty.
  virtual std::string_view Mapped() const { return {}; }
  // Tells the kernel that mapped bytes [0, upto) will not be read again (keeps RSS bounded).
  virtual void ReleaseMapped(std::uint64_t /*upto*/) {}

  // Reads up to `n` bytes of text; 0 at the end. Not for mapped inputs.
  virtual Result<std::size_t> Read(char* dst, std::size_t n) = 0;
  // Compressed or raw bytes consumed so far (for progress against stored_size()).
  virtual std::uint64_t consumed() const = 0;

 protected:
  std::string display_name_;
  std::uint64_t stored_size_ = 0;
  std::int64_t mtime_unix_ = 0;
  bool gzip_ = false;
};

}  // namespace embstore::convert

#endif  // EMBSTORE_CONVERT_SRC_INPUT_H_
