// Test-only: the keyed f32 tables the objstore tests upload and download. Header-only, for test
// binaries that link GoogleTest and embstore::store.
#ifndef EMBSTORE_OBJSTORE_TEST_TABLES_H_
#define EMBSTORE_OBJSTORE_TEST_TABLES_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embstore/store/writer.h"
#include "embstore/testkit/temp_dir.h"

namespace embstore::objstore::testing {

// DIR/NAME: `rows` x `dim` f32, row r column c holding seed + r*dim + c, keys "k<r>", checksum
// blocks of 1000 rows. Returns its path.
inline std::string MakeKeyedTable(const testkit::TempDir& dir, const std::string& name,
                                  std::uint64_t rows, std::uint64_t dim, float seed = 0) {
  store::WriterOptions wo;
  wo.dim = dim;
  wo.with_keys = true;
  wo.block_rows = 1000;
  const std::string path = dir.File(name);
  auto w = store::TableWriter::Create(path, wo);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  std::vector<float> row(dim);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < dim; ++c) row[c] = seed + static_cast<float>(r * dim + c);
    EXPECT_TRUE((*w)->AppendRows(std::as_bytes(std::span<const float>(row))).ok());
    EXPECT_TRUE((*w)->AppendKey("k" + std::to_string(r)).ok());
  }
  EXPECT_TRUE((*w)->Finish().ok());
  return path;
}

}  // namespace embstore::objstore::testing

#endif  // EMBSTORE_OBJSTORE_TEST_TABLES_H_
