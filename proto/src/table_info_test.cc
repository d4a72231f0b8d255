// The TableDesc <-> v1::TableInfo mapping: every field survives the wire, and a description a
// peer sends is checked before anything is sized from it.
#include "embstore/proto/table_info.h"

#include <gtest/gtest.h>

#include <limits>

namespace embstore::proto {
namespace {

store::TableDesc Sample() {
  store::TableDesc d;
  d.name = "items";
  d.rows = 1000;
  d.dim = 24;
  d.dtype = store::DType::kF16;
  d.row_bytes = 48;
  d.content_id = 0xfedcba9876543210ull;
  d.generation = 3;
  d.block_rows = 64;
  d.num_blocks = 16;
  d.has_keys = true;
  d.key_bytes = 4890;
  d.format_version = 1;
  d.data_offset = 65536;
  d.metadata = {{"origin", "tests"}};
  d.file = store::ServerFile{"/srv/items.emb", FileIdentity{7, 42, 123456, -5}};
  return d;
}

TEST(TableInfoMapping, EveryFieldRoundTripsThroughTheWire) {
  const store::TableDesc d = Sample();
  v1::TableInfo info;
  ToTableInfo(d, /*with_metadata=*/true, &info);
  EXPECT_EQ(info.checksum_algorithm(), "xxh3-64");
  EXPECT_EQ(info.key_count(), 1000u);
  auto back = FromTableInfo(info, "server 'h:1'");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->name, d.name);
  EXPECT_EQ(back->rows, d.rows);
  EXPECT_EQ(back->dim, d.dim);
  EXPECT_EQ(back->dtype, d.dtype);
  EXPECT_EQ(back->row_bytes, d.row_bytes);
  EXPECT_EQ(back->content_id, d.content_id);
  EXPECT_EQ(back->generation, d.generation);
  EXPECT_EQ(back->block_rows, d.block_rows);
  EXPECT_EQ(back->num_blocks, d.num_blocks);
  EXPECT_EQ(back->has_keys, d.has_keys);
  EXPECT_EQ(back->key_bytes, d.key_bytes);
  EXPECT_EQ(back->format_version, d.format_version);
  EXPECT_EQ(back->data_offset, d.data_offset);
  EXPECT_EQ(back->metadata, d.metadata);
  ASSERT_TRUE(back->file.has_value());
  EXPECT_EQ(back->file->path, d.file->path);
  EXPECT_EQ(back->file->identity, d.file->identity);

  v1::TableInfo listed;  // ListTables: no metadata; no keys: no key counts
  store::TableDesc keyless = d;
  keyless.has_keys = false;
  keyless.file.reset();
  ToTableInfo(keyless, /*with_metadata=*/false, &listed);
  EXPECT_TRUE(listed.metadata().empty());
  EXPECT_EQ(listed.key_count(), 0u);
  EXPECT_EQ(listed.key_bytes(), 0u);
  EXPECT_FALSE(FromTableInfo(listed, "server 'h:1'")->file.has_value());
}

TEST(TableInfoMapping, HostileOrInconsistentDescriptionsAreRefusedNamingThePeer) {
  v1::TableInfo info;
  ToTableInfo(Sample(), true, &info);
  v1::TableInfo huge = info;
  huge.set_rows(std::numeric_limits<std::uint64_t>::max());
  auto st = FromTableInfo(huge, "server 'h:1'");
  EXPECT_EQ(st.status().code(), StatusCode::kCorruption) << st.status().ToString();
  EXPECT_NE(st.status().message().find("server 'h:1'"), std::string::npos);

  v1::TableInfo wrong = info;
  wrong.set_row_bytes(47);
  st = FromTableInfo(wrong, "server 'h:1'");
  EXPECT_EQ(st.status().code(), StatusCode::kInternal) << st.status().ToString();
  EXPECT_NE(st.status().message().find("inconsistently"), std::string::npos);

  v1::TableInfo newer = info;
  newer.set_dtype(static_cast<v1::DType>(99));
  st = FromTableInfo(newer, "server 'h:1'");
  EXPECT_EQ(st.status().code(), StatusCode::kUnimplemented) << st.status().ToString();
  EXPECT_NE(st.status().message().find("items"), std::string::npos);
}

}  // namespace
}  // namespace embstore::proto
