// Private: the safetensors JSON header of a table file (docs/FORMAT.md, "Header").
#ifndef EMBSTORE_STORE_HEADER_H_
#define EMBSTORE_STORE_HEADER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "embstore/common/status.h"

namespace embstore::store {

// One entry of the header: a tensor and its byte range in the data buffer.
struct TensorEntry {
  std::string name;
  std::string dtype;  // safetensors spelling: "F32", "U64", "U8", ...
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // data_offsets, relative to the data buffer
  std::uint64_t end = 0;
};

struct HeaderContent {
  // __metadata__, in the order it is written (embstore.* first, then the user's keys).
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<TensorEntry> tensors;  // in data-buffer order
};

// Serializes to compact JSON. InvalidArgument if a metadata string is not valid UTF-8.
Result<std::string> SerializeHeader(const HeaderContent& header);

// Parses the JSON text of a header. Corruption (with `file` in the message) on malformed JSON or
// an entry that is not shaped as safetensors requires. Tensors are returned sorted by `begin`.
Result<HeaderContent> ParseHeader(std::string_view json, const std::string& file);

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_HEADER_H_
