// Private: helpers shared by the server tests (test tables and a checker for streamed chunks).
#ifndef EMBSTORE_SERVER_SRC_TEST_UTIL_H_
#define EMBSTORE_SERVER_SRC_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "embstore/common/status.h"
#include "embstore/store/dtype.h"
#include "embstore/testkit/temp_dir.h"
#include "embstore/v1/embstore.pb.h"

namespace embstore::server::testing {

// A fresh directory, removed with everything in it on destruction.
using TempDir = embstore::testkit::TempDir;

struct TableSpec {
  std::uint64_t rows = 100;
  std::uint64_t dim = 8;
  store::DType dtype = store::DType::kF32;
  bool with_keys = true;
  std::uint64_t block_rows = 16;
  float salt = 0;  // shifts every value, so two versions of a table differ
};

// A rows x dim f32 table without keys, in the writer's default blocks: big enough to outlast
// the transport's buffers and flow-control windows.
inline TableSpec LargeTable(std::uint64_t rows, std::uint64_t dim, float salt = 0) {
  return TableSpec{.rows = rows,
                   .dim = dim,
                   .dtype = store::DType::kF32,
                   .with_keys = false,
                   .block_rows = 0,
                   .salt = salt};
}

// The value a test table holds at (row, col): exactly representable in every dtype for small
// tables.
float TestValue(std::uint64_t row, std::uint64_t col, float salt);
std::string TestKey(std::uint64_t row);

// Writes a table (published by rename, as the writer always does).
Status WriteTestTable(const std::string& path, const TableSpec& spec);

// The bytes rows [begin, end) of such a table hold.
std::string ExpectedRowBytes(const TableSpec& spec, std::uint64_t begin, std::uint64_t end);

// Checks a complete row stream (in order): contiguous rows from begin to end, the same content_id
// throughout, table info in the first chunk only, every block checksum and payload checksum
// right, payloads equal to `expected`. Returns a description of the first problem, or "".
std::string CheckRowStream(const std::vector<v1::RowChunk>& chunks, std::uint64_t begin,
                           std::uint64_t end, const std::string& expected);

}  // namespace embstore::server::testing

#endif  // EMBSTORE_SERVER_SRC_TEST_UTIL_H_
