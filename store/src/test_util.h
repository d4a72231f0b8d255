// Private: helpers shared by the store tests.
#ifndef EMBSTORE_STORE_TEST_UTIL_H_
#define EMBSTORE_STORE_TEST_UTIL_H_

#include <stdlib.h>

#include <cstdint>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "embstore/store/table.h"
#include "embstore/testkit/temp_dir.h"
#include "embstore/store/writer.h"

namespace embstore::store::testing {

// A fresh directory, removed when the test program exits.
inline std::string TempDir() { return testkit::ScratchDir("store-test"); }

inline std::string ReadFile(const std::string& path) { return testkit::ReadFileOrEmpty(path); }

inline void WriteFile(const std::string& path, const std::string& bytes) {
  testkit::WriteFileOrDie(path, bytes);
}

// rows x dim floats, deterministic for a seed.
inline std::vector<float> RandomMatrix(std::uint64_t rows, std::uint64_t dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> m(rows * dim);
  for (auto& v : m) v = dist(rng);
  return m;
}

inline std::vector<std::string> MakeKeys(std::uint64_t rows) {
  std::vector<std::string> keys;
  for (std::uint64_t r = 0; r < rows; ++r)
    keys.push_back("word_" + std::to_string(r * 7919 % 100003) + "_" + std::to_string(r));
  return keys;
}

// Writes a table and returns the status of the whole sequence.
inline Status WriteTable(const std::string& path, const std::vector<float>& values,
                         std::uint64_t dim, DType dtype, const std::vector<std::string>* keys,
                         std::uint64_t block_rows = 0) {
  WriterOptions o;
  o.dim = dim;
  o.dtype = dtype;
  o.with_keys = keys != nullptr;
  o.block_rows = block_rows;
  o.metadata["note"] = "test";
  EMBSTORE_ASSIGN_OR_RETURN(auto w, TableWriter::Create(path, o));
  EMBSTORE_RETURN_NOT_OK(w->AppendRowsF32(values));
  if (keys) {
    for (const auto& k : *keys) EMBSTORE_RETURN_NOT_OK(w->AppendKey(k));
  }
  return w->Finish();
}

}  // namespace embstore::store::testing

#endif  // EMBSTORE_STORE_TEST_UTIL_H_
