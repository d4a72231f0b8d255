// The NumPy .npy format (version 1.0), enough to write a C-ordered 2-D little-endian array.
// Used by `embstore export` and `embstore pull`. Thread-safe (pure functions).
#ifndef EMBSTORE_STORE_NPY_H_
#define EMBSTORE_STORE_NPY_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace embstore::store {

// The complete .npy preamble (magic, version, header length, dict, padding) for an array of
// `rows` x `cols` elements of NumPy type `descr` ("<f4", "<f2"). Its size is a multiple of 64, so
// the data that follows it is 64-byte aligned in the file.
std::string NpyHeader(std::string_view descr, std::uint64_t rows, std::uint64_t cols);

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_NPY_H_
