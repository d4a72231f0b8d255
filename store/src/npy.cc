#include "embstore/store/npy.h"

#include <cstring>

namespace embstore::store {

std::string NpyHeader(std::string_view descr, std::uint64_t rows, std::uint64_t cols) {
  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': (" +
                     std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // magic(6) + version(2) + header_len(2) + dict + padding + '\n', a multiple of 64 in all.
  std::size_t total = 10 + dict.size() + 1;
  total = (total + 63) / 64 * 64;
  dict.resize(total - 10 - 1, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  std::uint16_t len = static_cast<std::uint16_t>(dict.size());
  char le[2];
  std::memcpy(le, &len, 2);
  out.append(le, 2);
  out += dict;
  return out;
}

}  // namespace embstore::store
