#include "embstore/store/format.h"

#include <algorithm>

namespace embstore::store {

std::string_view EmbstoreVersion() { return EMBSTORE_VERSION; }

Result<TableGeometry> ComputeGeometry(std::uint64_t rows, std::uint64_t dim,
                                      std::uint64_t element_size, std::uint64_t block_rows,
                                      const std::string& what) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(what + ": " + why);
  };
  if (dim == 0) return bad("dim is 0");
  if (dim > kMaxDim) {
    return bad("dim " + std::to_string(dim) + " is larger than the limit of " +
               std::to_string(kMaxDim));
  }
  if (element_size == 0 || element_size > 8) {
    return bad("element size " + std::to_string(element_size) + " is not a table dtype's");
  }
  if (block_rows == 0) return bad("block_rows is 0");
  TableGeometry g;
  g.rows = rows;
  g.dim = dim;
  g.row_bytes = dim * element_size;  // < 2^27: kMaxDim * 8
  if (__builtin_mul_overflow(rows, g.row_bytes, &g.matrix_bytes) ||
      g.matrix_bytes > kMaxMatrixBytes) {
    return bad(std::to_string(rows) + " rows of " + std::to_string(g.row_bytes) +
               " bytes are more than the limit of " + std::to_string(kMaxMatrixBytes) +
               " bytes");
  }
  g.block_rows = block_rows;
  g.num_blocks = rows / block_rows + (rows % block_rows != 0);
  g.block_bytes = std::min(block_rows, rows) * g.row_bytes;  // <= matrix_bytes
  return g;
}

}  // namespace embstore::store
