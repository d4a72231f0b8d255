// Private: the tables the client tests load, written with the real store writer, and the real
// server they load them from.
#ifndef EMBSTORE_CLIENT_SRC_TEST_TABLES_H_
#define EMBSTORE_CLIENT_SRC_TEST_TABLES_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "embstore/server/server.h"
#include "embstore/store/table.h"
#include "embstore/store/writer.h"

namespace embstore::client::testing {

inline std::string TestKey(std::uint64_t row) { return "key" + std::to_string(row); }

// Writes a rows x dim table of normally distributed values drawn from `seed` (rounded to
// `dtype`), with keys TestKey(first_key + row) when `keys`; returns the encoded row bytes the
// table holds.
inline std::vector<std::byte> WriteRandomTable(const std::string& path, std::uint64_t rows,
                                               std::uint64_t dim, store::DType dtype, bool keys,
                                               std::uint64_t block_rows, unsigned seed,
                                               std::uint64_t first_key = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0, 1);
  std::vector<float> v(rows * dim);
  for (auto& x : v) x = dist(rng);
  store::WriterOptions o;
  o.dim = dim;
  o.dtype = dtype;
  o.with_keys = keys;
  o.block_rows = block_rows;
  o.metadata["origin"] = "client tests";
  auto w = store::TableWriter::Create(path, o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return {};
  EXPECT_TRUE((*w)->AppendRowsF32(v).ok());
  for (std::uint64_t r = 0; keys && r < rows; ++r) EXPECT_TRUE((*w)->AppendKey(TestKey(first_key + r)).ok());
  EXPECT_TRUE((*w)->Finish().ok());
  auto t = store::Table::Open(path);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return {};
  auto bytes = (*t)->RowBytes(0, rows);
  EXPECT_TRUE(bytes.ok());
  if (!bytes.ok()) return {};
  return std::vector<std::byte>(bytes->begin(), bytes->end());
}

// An in-process server of the store directory `dir` on `listen`, which never rescans by itself
// (tests refresh explicitly), with `tokens` required when given.
inline Result<std::unique_ptr<server::Server>> StartTestServer(
    const std::string& dir, const std::string& listen = "127.0.0.1:0",
    std::vector<std::string> tokens = {}) {
  server::ServerConfig cfg;
  cfg.store_dir = dir;
  cfg.listen = {listen};
  cfg.poll_interval = std::chrono::milliseconds(3600 * 1000);
  cfg.auth_tokens = std::move(tokens);
  cfg.log_level = "error";
  return server::Server::Start(cfg);
}

}  // namespace embstore::client::testing

#endif  // EMBSTORE_CLIENT_SRC_TEST_TABLES_H_
