// Golden table files written by embstore_make_test_table for format versions 1 and 2 (see
// tests/data/README.md). A change to the format that stops these from reading is a break of
// compatibility: bump the version in docs/FORMAT.md and add new golden files instead.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embstore/store/table.h"

namespace embstore::store {
namespace {

float Expected(std::uint64_t r, std::uint64_t c) {
  return static_cast<float>(static_cast<int>((r * 31 + c * 7) % 256) - 128) / 4.0f;
}

void CheckGolden(const std::string& name, DType dtype, std::uint64_t rows, std::uint64_t dim,
                 bool keys, const std::string& key_prefix, int version = 1) {
  auto t = Table::Open(std::string(EMBSTORE_TEST_DATA_DIR) + "/" + name, {.verify = true});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->format_version(), version);
  // Version 1 keys carry no checksums; version 2 keys do, and they pass.
  EXPECT_EQ((*t)->keys_checksummed(), keys && version >= 2);
  EXPECT_TRUE((*t)->VerifyKeys().ok());
  EXPECT_EQ((*t)->dtype(), dtype);
  ASSERT_EQ((*t)->rows(), rows);
  ASSERT_EQ((*t)->dim(), dim);
  std::vector<float> m(rows * dim);
  ASSERT_TRUE((*t)->ReadRowsF32(0, rows, m).ok());
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c = 0; c < dim; ++c) ASSERT_EQ(m[r * dim + c], Expected(r, c));
  }
  // Version 3 goldens store row hashes; VerifyAll (at open) checked them against the rows.
  EXPECT_EQ((*t)->has_row_hashes(), version >= 3);
  ASSERT_EQ((*t)->has_keys(), keys);
  for (std::uint64_t r = 0; keys && r < rows; ++r) {
    std::string k = key_prefix + std::to_string(r);
    ASSERT_EQ((*t)->Key(r), k);
    ASSERT_EQ(*(*t)->FindKey(k), r);
  }
}

TEST(Golden, V1F32WithKeys) {
  CheckGolden("golden_v1_f32_keys.emb", DType::kF32, 50, 8, true, "k");
}
TEST(Golden, V1F16UnicodeKeys) {
  CheckGolden("golden_v1_f16_unicode.emb", DType::kF16, 33, 3, true, "ключ");
}
TEST(Golden, V1BF16NoKeys) { CheckGolden("golden_v1_bf16.emb", DType::kBF16, 20, 5, false, ""); }
TEST(Golden, V1EmptyTable) { CheckGolden("golden_v1_empty.emb", DType::kF32, 0, 4, true, "k"); }
TEST(Golden, V2F32WithKeys) {
  CheckGolden("golden_v2_f32_keys.emb", DType::kF32, 50, 8, true, "k", 2);
}
TEST(Golden, V2F16UnicodeKeys) {
  CheckGolden("golden_v2_f16_unicode.emb", DType::kF16, 33, 3, true, "ключ", 2);
}
TEST(Golden, V3F32WithKeysAndRowHashes) {
  CheckGolden("golden_v3_f32_keys.emb", DType::kF32, 50, 8, true, "k", 3);
}
TEST(Golden, V3BF16RowHashes) {
  CheckGolden("golden_v3_bf16.emb", DType::kBF16, 20, 5, false, "", 3);
}
TEST(Golden, V3EmptyTable) {
  CheckGolden("golden_v3_empty.emb", DType::kF32, 0, 4, false, "", 3);
}
TEST(Golden, V2EmptyTable) {
  CheckGolden("golden_v2_empty.emb", DType::kF32, 0, 4, true, "k", 2);
}

}  // namespace
}  // namespace embstore::store
