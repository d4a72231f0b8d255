// embstore_make_test_table: writes a table of known values for tests and golden files.
//
// Value of row r, column c: ((r * 31 + c * 7) % 256 - 128) / 4, exact in F32, F16 and BF16, so a
// reader in any language can check every element without the writer's help. Key of row r:
// "k<r>" (or, with --unicode-keys, "ключ<r>").
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "embstore/store/writer.h"

int main(int argc, char** argv) {
  using namespace embstore::store;
  CLI::App app{"Write a table file of known values (row r, col c: ((31r + 7c) % 256 - 128) / 4)"};
  std::string out, dtype = "f32";
  std::uint64_t rows = 10, dim = 4, block_rows = 0;
  bool keys = false, unicode = false, force = false, row_hashes = false;
  app.add_option("OUT", out, "Output table file")->required();
  app.add_option("--rows", rows, "Rows");
  app.add_option("--dim", dim, "Values per row");
  app.add_option("--dtype", dtype, "f32, f16 or bf16");
  app.add_option("--block-rows", block_rows, "Rows per checksum block (0: automatic)");
  app.add_flag("--keys", keys, "Give every row a key");
  app.add_flag("--unicode-keys", unicode, "Use non-ASCII keys");
  app.add_flag("--row-hashes", row_hashes, "Store each row's hash (format version 3)");
  app.add_flag("--force", force, "Replace OUT if it exists");
  CLI11_PARSE(app, argc, argv);

  auto dt = ParseDType(dtype);
  if (!dt) {
    std::fprintf(stderr, "unknown dtype '%s'\n", dtype.c_str());
    return 2;
  }
  WriterOptions o;
  o.dtype = *dt;
  o.dim = dim;
  o.with_keys = keys || unicode;
  o.row_hashes = row_hashes;
  o.overwrite = force;
  o.block_rows = block_rows;
  o.metadata["generator"] = "embstore_make_test_table";
  auto w = TableWriter::Create(out, o);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.status().ToString().c_str());
    return 1;
  }
  std::vector<float> row(dim);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < dim; ++c) {
      row[c] = static_cast<float>(static_cast<int>((r * 31 + c * 7) % 256) - 128) / 4.0f;
    }
    embstore::Status st = (*w)->AppendRowsF32(row);
    if (st.ok() && o.with_keys) {
      st = (*w)->AppendKey((unicode ? "ключ" : "k") + std::to_string(r));
    }
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
  }
  embstore::Status st = (*w)->Finish();
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
