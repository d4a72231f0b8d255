#include "service.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <span>
#include <vector>

#include "embstore/store/checksum.h"
#include "test_util.h"

namespace embstore::server {
namespace {

using testing::CheckRowStream;
using testing::ExpectedRowBytes;

// The rows' bytes of a lookup's reply.
std::string Data(const LookupReply& r) {
  return std::string(reinterpret_cast<const char*>(r.data.get()), r.data_size);
}
using testing::TableSpec;
using testing::TempDir;
using testing::WriteTestTable;

// Turns views into messages, as a client would see them after parsing.
v1::RowChunk ToMessage(const RowChunkView& c) {
  v1::RowChunk m;
  m.set_first_row(c.first_row);
  m.set_row_count(c.row_count);
  m.set_first_block(c.first_block);
  for (auto s : c.block_checksums) m.add_block_checksums(s);
  if (c.payload_checksum) m.set_payload_checksum(*c.payload_checksum);
  m.set_content_id(c.content_id);
  if (c.first) {
    Service::FillTableInfo(*c.entry, false, m.mutable_table());
    m.set_chunk_rows(c.chunk_rows);
  }
  m.set_payload(std::string(reinterpret_cast<const char*>(c.payload.data()), c.payload.size()));
  return m;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteTestTable(dir_.File("words.emb"), spec_).ok());
    ASSERT_TRUE(WriteTestTable(dir_.File("plain.emb"), plain_).ok());
    auto c = Catalog::Open({.dir = dir_.path()});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    catalog_ = std::shared_ptr<Catalog>(std::move(c).value());
    service_ = std::make_unique<Service>(catalog_, options_);
  }

  Result<std::vector<v1::RowChunk>> Pull(const v1::StreamRowsRequest& req) {
    EMBSTORE_ASSIGN_OR_RETURN(auto stream, service_->StreamRows(req));
    std::vector<v1::RowChunk> out;
    for (;;) {
      EMBSTORE_ASSIGN_OR_RETURN(auto c, stream->Next());
      if (!c) break;
      out.push_back(ToMessage(*c));
    }
    return out;
  }

  v1::StreamRowsRequest Req(const std::string& table, std::uint64_t begin,
                            std::optional<std::uint64_t> end, std::uint64_t chunk_bytes = 0) {
    v1::StreamRowsRequest r;
    r.set_table(table);
    r.set_begin_row(begin);
    if (end) r.set_end_row(*end);
    r.set_chunk_bytes(chunk_bytes);
    return r;
  }

  TempDir dir_;
  TableSpec spec_{.rows = 1000,
                  .dim = 16,
                  .dtype = store::DType::kF32,
                  .with_keys = true,
                  .block_rows = 64,
                  .salt = 0};
  TableSpec plain_{.rows = 50,
                   .dim = 4,
                   .dtype = store::DType::kBF16,
                   .with_keys = false,
                   .block_rows = 8,
                   .salt = 0};
  ServiceOptions options_;
  std::shared_ptr<Catalog> catalog_;
  std::unique_ptr<Service> service_;
};

TEST_F(ServiceTest, ListsEveryTableWithShapeAndVersion) {
  auto r = service_->ListTables({});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->tables_size(), 2);
  const v1::TableInfo& p = r->tables(0);
  EXPECT_EQ(p.name(), "plain");
  EXPECT_EQ(p.rows(), 50u);
  EXPECT_EQ(p.dim(), 4u);
  EXPECT_EQ(p.dtype(), v1::DTYPE_BF16);
  EXPECT_EQ(p.row_bytes(), 8u);
  EXPECT_FALSE(p.has_keys());
  EXPECT_EQ(p.metadata_size(), 0);  // only DescribeTable carries user metadata
  const v1::TableInfo& w = r->tables(1);
  EXPECT_EQ(w.name(), "words");
  EXPECT_EQ(w.checksum_algorithm(), "xxh3-64");
  EXPECT_EQ(w.block_rows(), 64u);
  EXPECT_EQ(w.num_blocks(), 16u);
  EXPECT_NE(w.content_id(), 0u);
  EXPECT_GT(w.file().inode(), 0u);
  EXPECT_EQ(w.file().size(), catalog_->Get("words").value()->table().file_size());
}

TEST_F(ServiceTest, DescribesOneTableWithMetadataAndKeyCount) {
  v1::DescribeTableRequest req;
  req.set_table("words");
  auto r = service_->DescribeTable(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->key_count(), 1000u);
  EXPECT_TRUE(r->has_keys());
  EXPECT_EQ(r->metadata().at("purpose"), "server test");
  EXPECT_EQ(r->metadata().count("embstore.format"), 0u);
}

TEST_F(ServiceTest, StreamsTheWholeTableInBlockAlignedChunks) {
  // 2 blocks of 64 rows x 64 bytes fit in 10000 bytes.
  auto chunks = Pull(Req("words", 0, std::nullopt, 10000));
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(CheckRowStream(*chunks, 0, 1000, ExpectedRowBytes(spec_, 0, 1000)), "");
  EXPECT_EQ(chunks->front().chunk_rows(), 128u);
  for (const auto& c : *chunks) {
    EXPECT_EQ(c.first_row() % 128, 0u);
    EXPECT_FALSE(c.has_payload_checksum());  // whole blocks: the stored sums verify them
  }
}

TEST_F(ServiceTest, UnalignedRangeGetsPayloadChecksumsOnlyAtTheEdges) {
  auto chunks = Pull(Req("words", 100, 900, 64 * 64 * 4));
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(CheckRowStream(*chunks, 100, 900, ExpectedRowBytes(spec_, 100, 900)), "");
  EXPECT_EQ(chunks->front().first_row(), 100u);
  EXPECT_EQ(chunks->front().row_count(), 220u);  // to block 1 + 4 blocks = row 320
  EXPECT_TRUE(chunks->front().has_payload_checksum());
  EXPECT_TRUE(chunks->back().has_payload_checksum());
  EXPECT_FALSE((*chunks)[1].has_payload_checksum());
}

TEST_F(ServiceTest, ChunksSmallerThanABlockNeverCrossABlock) {
  auto chunks = Pull(Req("words", 0, std::nullopt, 1000));  // 15 rows of 64 bytes
  ASSERT_TRUE(chunks.ok());
  EXPECT_EQ(CheckRowStream(*chunks, 0, 1000, ExpectedRowBytes(spec_, 0, 1000)), "");
  for (const auto& c : *chunks) {
    EXPECT_EQ(c.block_checksums_size(), 1);
    // Every block is sent entirely: the client checks it once its last piece is in, and the
    // server never hashes payload.
    EXPECT_FALSE(c.has_payload_checksum());
  }
  auto cut = Pull(Req("words", 10, 990, 1000));
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(CheckRowStream(*cut, 10, 990, ExpectedRowBytes(spec_, 10, 990)), "");
  EXPECT_TRUE(cut->front().has_payload_checksum());  // pieces of block 0, which starts at row 0
  EXPECT_TRUE(cut->back().has_payload_checksum());   // and of block 15, which ends at row 1000
  EXPECT_FALSE((*cut)[5].has_payload_checksum());
}

TEST_F(ServiceTest, EmptyRangeStillSendsTheTableInfo) {
  auto chunks = Pull(Req("words", 1000, std::nullopt));
  ASSERT_TRUE(chunks.ok());
  ASSERT_EQ(chunks->size(), 1u);
  EXPECT_TRUE(chunks->front().has_table());
  EXPECT_EQ(chunks->front().row_count(), 0u);
}

TEST_F(ServiceTest, BadStreamRequestsNameWhatWasWrong) {
  struct Case {
    v1::StreamRowsRequest req;
    StatusCode code;
    const char* mention;
  };
  std::vector<Case> cases = {
      {Req("nope", 0, std::nullopt), StatusCode::kNotFound, "'nope'"},
      {Req("../words", 0, std::nullopt), StatusCode::kInvalidArgument, "invalid table name"},
      {Req("words", 1001, std::nullopt), StatusCode::kOutOfRange, "begin_row 1001"},
      {Req("words", 0, 1001), StatusCode::kOutOfRange, "end_row 1001"},
      {Req("words", 10, 5), StatusCode::kInvalidArgument, "after end_row"},
      {Req("words", 0, std::nullopt, 1ull << 40), StatusCode::kInvalidArgument, "limit"},
      {Req("words", 0, std::nullopt, 10), StatusCode::kInvalidArgument, "smaller than one row"},
  };
  v1::StreamRowsRequest stale = Req("words", 0, std::nullopt);
  stale.set_expected_content_id(12345);
  cases.push_back({stale, StatusCode::kFailedPrecondition, "content_id"});
  for (const auto& c : cases) {
    auto r = service_->StreamRows(c.req);
    ASSERT_FALSE(r.ok()) << c.req.ShortDebugString();
    EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.mention), std::string::npos) << r.status().message();
  }
}

TEST_F(ServiceTest, ResumesWithTheContentIdOfTheFirstPull) {
  auto first = Pull(Req("words", 0, 200));
  ASSERT_TRUE(first.ok());
  v1::StreamRowsRequest resume = Req("words", 200, std::nullopt);
  resume.set_expected_content_id(first->front().content_id());
  auto rest = Pull(resume);
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(CheckRowStream(*rest, 200, 1000, ExpectedRowBytes(spec_, 200, 1000)), "");
}

TEST_F(ServiceTest, StreamFinishesOnTheVersionItStartedWith) {
  auto stream = service_->StreamRows(Req("words", 0, std::nullopt, 4096)).value();
  std::vector<v1::RowChunk> chunks;
  chunks.push_back(ToMessage(*stream->Next().value()));
  TableSpec v2 = spec_;
  v2.salt = 5;
  ASSERT_TRUE(WriteTestTable(dir_.File("words.emb"), v2).ok());
  ASSERT_TRUE(catalog_->Refresh().ok());
  for (;;) {
    auto c = stream->Next();
    ASSERT_TRUE(c.ok());
    if (!*c) break;
    chunks.push_back(ToMessage(**c));
  }
  EXPECT_EQ(CheckRowStream(chunks, 0, 1000, ExpectedRowBytes(spec_, 0, 1000)), "");
  auto fresh = Pull(Req("words", 0, std::nullopt));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(CheckRowStream(*fresh, 0, 1000, ExpectedRowBytes(v2, 0, 1000)), "");
  EXPECT_NE(fresh->front().content_id(), chunks.front().content_id());
}

TEST_F(ServiceTest, StreamOverATruncatedFileEndsWithDataLoss) {
  auto stream = service_->StreamRows(Req("words", 0, std::nullopt, 4096)).value();
  ASSERT_TRUE(stream->Next().ok());
  ASSERT_EQ(::truncate(dir_.File("words.emb").c_str(), 8192), 0);
  Status st;
  for (int i = 0; i < 100 && st.ok(); ++i) {
    auto c = stream->Next();
    if (!c.ok()) st = c.status();
  }
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("words.emb"), std::string::npos) << st.message();
}

TEST_F(ServiceTest, LooksUpRowsById) {
  v1::LookupRequest req;
  req.set_table("words");
  for (std::uint64_t id : {999u, 0u, 500u, 0u}) req.mutable_rows()->add_ids(id);
  auto r = service_->Lookup(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->fields.rows_size(), 4);
  EXPECT_EQ(r->fields.dim(), 16u);
  EXPECT_EQ(r->fields.missing_size(), 0);
  EXPECT_EQ(Data(*r), ExpectedRowBytes(spec_, 999, 1000) + ExpectedRowBytes(spec_, 0, 1) +
                           ExpectedRowBytes(spec_, 500, 501) + ExpectedRowBytes(spec_, 0, 1));
}

TEST_F(ServiceTest, LooksUpKeysAndReportsTheMissingOnes) {
  v1::LookupRequest req;
  req.set_table("words");
  for (const char* k : {"key-7", "absent", "key-0", "also-absent"}) req.mutable_keys()->add_keys(k);
  auto r = service_->Lookup(req);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->fields.rows_size(), 2);
  EXPECT_EQ(r->fields.rows(0), 7u);
  EXPECT_EQ(r->fields.rows(1), 0u);
  ASSERT_EQ(r->fields.missing_size(), 2);
  EXPECT_EQ(r->fields.missing(0), 1u);
  EXPECT_EQ(r->fields.missing(1), 3u);
  EXPECT_EQ(Data(*r), ExpectedRowBytes(spec_, 7, 8) + ExpectedRowBytes(spec_, 0, 1));
}

TEST_F(ServiceTest, LookupRepliesCarryRowChecksumsAndNeverABadBlock) {
  // Flip one byte of row 140 of the served file (block 2 of 64-row blocks, rows [128, 192)).
  const std::string path = dir_.File("words.emb");
  const std::uint64_t row_bytes = spec_.dim * 4;
  std::uint64_t off = 0;
  {
    auto t = store::Table::Open(path);
    ASSERT_TRUE(t.ok());
    off = (*t)->data_offset() + 140 * row_bytes + 5;
  }
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(off)), 1);
  b ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(off)), 1);
  ::close(fd);

  v1::LookupRequest good;
  good.set_table("words");
  for (const char* k : {"key-7", "key-999"}) good.mutable_keys()->add_keys(k);
  auto r = service_->Lookup(good);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->fields.row_checksums_size(), 2);
  EXPECT_EQ(r->fields.row_checksums(0), store::Checksum64(r->bytes().first(row_bytes)));
  for (auto pick : {std::string("key-141"), std::string("key-128")}) {  // row 140's block
    v1::LookupRequest bad;
    bad.set_table("words");
    bad.mutable_keys()->add_keys(pick);
    auto st = service_->Lookup(bad).status();
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << pick;
    EXPECT_NE(st.message().find("checksum mismatch in block 2"), std::string::npos)
        << st.message();
  }
  v1::LookupRequest by_id;
  by_id.set_table("words");
  by_id.mutable_rows()->add_ids(140);
  EXPECT_EQ(service_->Lookup(by_id).status().code(), StatusCode::kCorruption);
}

TEST_F(ServiceTest, BadLookupsNameWhatWasWrong) {
  v1::LookupRequest none;
  none.set_table("words");
  EXPECT_EQ(service_->Lookup(none).status().code(), StatusCode::kInvalidArgument);

  v1::LookupRequest past;
  past.set_table("words");
  past.mutable_rows()->add_ids(3);
  past.mutable_rows()->add_ids(1000);
  auto st = service_->Lookup(past).status();
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("row id 1000 (item 1"), std::string::npos) << st.message();

  v1::LookupRequest keyless;
  keyless.set_table("plain");
  keyless.mutable_keys()->add_keys("x");
  EXPECT_EQ(service_->Lookup(keyless).status().code(), StatusCode::kFailedPrecondition);

  v1::LookupRequest big;
  big.set_table("words");
  for (std::uint64_t i = 0; i <= options_.max_lookup_batch; ++i) big.mutable_rows()->add_ids(0);
  st = service_->Lookup(big).status();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("batch limit"), std::string::npos);
}

TEST_F(ServiceTest, LookupReplyLargerThanTheMessageLimitIsRefused) {
  ServiceOptions small = options_;
  small.max_lookup_bytes = 64 * 10;
  Service s(catalog_, small);
  v1::LookupRequest req;
  req.set_table("words");
  for (int i = 0; i < 11; ++i) req.mutable_rows()->add_ids(i);
  auto st = s.Lookup(req).status();
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("704 bytes"), std::string::npos) << st.message();
}

TEST_F(ServiceTest, RowHashesComeOneARowOrOneAGroupOfRows) {
  std::vector<std::uint64_t> want(spec_.rows);
  for (std::uint64_t r = 0; r < spec_.rows; ++r) {
    const std::string row = ExpectedRowBytes(spec_, r, r + 1);
    want[r] = store::Checksum64(std::as_bytes(std::span(row.data(), row.size())));
  }
  auto hashes_of = [](const std::string& bytes) {
    std::vector<std::uint64_t> h(bytes.size() / 8);
    std::memcpy(h.data(), bytes.data(), h.size() * 8);
    return h;
  };
  auto group_hash = [&](std::uint64_t first, std::uint64_t last) {
    return store::Checksum64(std::as_bytes(std::span(want).subspan(first, last - first)));
  };
  v1::RowHashesRequest req;
  req.set_table("words");
  auto rows = service_->RowHashes(req);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(hashes_of(rows->row_hashes()), want);
  EXPECT_TRUE(rows->group_hashes().empty());
  EXPECT_EQ(rows->block_checksums_size(), 16);  // 1000 rows in blocks of 64

  // Groups of 7 rows, counted from row 0: 143 of them, the last one 6 rows.
  req.set_group_rows(7);
  auto groups = service_->RowHashes(req);
  ASSERT_TRUE(groups.ok()) << groups.status().ToString();
  EXPECT_TRUE(groups->row_hashes().empty());
  const auto g = hashes_of(groups->group_hashes());
  ASSERT_EQ(g.size(), 143u);
  for (std::uint64_t k = 0; k < g.size(); ++k) {
    EXPECT_EQ(g[k], group_hash(k * 7, std::min<std::uint64_t>(1000, k * 7 + 7))) << k;
  }
  EXPECT_EQ(groups->block_checksums_size(), 16);
  req.set_begin_row(14);
  req.set_end_row(28);
  auto two = service_->RowHashes(req);
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->first_row(), 14u);
  EXPECT_EQ(hashes_of(two->group_hashes()),
            (std::vector<std::uint64_t>{group_hash(14, 21), group_hash(21, 28)}));

  // The row hashes of chosen groups, one group after another (begin and end not used).
  req.add_groups(0);
  req.add_groups(5);
  req.add_groups(142);
  auto chosen = service_->RowHashes(req);
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  std::vector<std::uint64_t> expect(want.begin(), want.begin() + 7);
  expect.insert(expect.end(), want.begin() + 35, want.begin() + 42);
  expect.insert(expect.end(), want.begin() + 994, want.end());
  EXPECT_EQ(hashes_of(chosen->row_hashes()), expect);
  EXPECT_TRUE(chosen->verified());

  auto bad = [&](auto edit, const std::string& says) {
    v1::RowHashesRequest r;
    r.set_table("words");
    r.set_group_rows(7);
    edit(r);
    auto st = service_->RowHashes(r).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  bad([](auto& r) { r.set_begin_row(3); }, "must begin and end where groups do");
  bad([](auto& r) { r.set_end_row(30); }, "must begin and end where groups do");
  bad([](auto& r) { r.set_group_rows(70000); }, "at most 65536 rows a group");
  bad([](auto& r) { r.add_groups(5); r.add_groups(5); }, "groups must ascend");
  bad([](auto& r) { r.add_groups(143); }, "past the table's 143 groups of 7 rows");
  bad([](auto& r) { r.set_group_rows(1); r.add_groups(0); }, "need group_rows of 2 or more");
}

TEST_F(ServiceTest, GroupHashesKeptWithAVersionMatchTheRowsOfThatVersion) {
  // Groups of 16 rows or more are computed once per loaded version and kept (TableEntry).
  auto group_hashes = [&](const TableSpec& spec, std::uint64_t group_rows, std::uint64_t first,
                          std::uint64_t last) {
    std::vector<std::uint64_t> row(spec.rows);
    for (std::uint64_t r = 0; r < spec.rows; ++r) {
      const std::string bytes = ExpectedRowBytes(spec, r, r + 1);
      row[r] = store::Checksum64(std::as_bytes(std::span(bytes.data(), bytes.size())));
    }
    std::vector<std::uint64_t> out;
    for (std::uint64_t at = first; at < last; at += group_rows) {
      const std::uint64_t end = std::min(last, at + group_rows);
      out.push_back(store::RowGroupHash(std::span(row).subspan(at, end - at)));
    }
    return out;
  };
  auto ask = [&](std::uint64_t group_rows, std::uint64_t begin, std::optional<std::uint64_t> end) {
    v1::RowHashesRequest req;
    req.set_table("words");
    req.set_group_rows(group_rows);
    req.set_begin_row(begin);
    if (end) req.set_end_row(*end);
    auto r = service_->RowHashes(req);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<std::uint64_t> h(r.ok() ? r->group_hashes().size() / 8 : 0);
    if (r.ok()) std::memcpy(h.data(), r->group_hashes().data(), h.size() * 8);
    return h;
  };
  // 1000 rows: 63 groups of 16, the last one 8 rows. Asked twice (the second time from what was
  // kept), then a range, then another size (which replaces what is kept), then 16 again.
  EXPECT_EQ(ask(16, 0, std::nullopt), group_hashes(spec_, 16, 0, 1000));
  EXPECT_EQ(ask(16, 0, std::nullopt), group_hashes(spec_, 16, 0, 1000));
  EXPECT_EQ(ask(16, 32, 64), group_hashes(spec_, 16, 32, 64));
  EXPECT_EQ(ask(16, 992, std::nullopt), group_hashes(spec_, 16, 992, 1000));
  EXPECT_EQ(ask(32, 64, std::nullopt), group_hashes(spec_, 32, 64, 1000));
  EXPECT_EQ(ask(16, 16, 48), group_hashes(spec_, 16, 16, 48));

  // Groups that are not the table's are refused, naming it.
  auto entry = catalog_->Get("words");
  ASSERT_TRUE(entry.ok()) << entry.status().ToString();
  std::vector<std::uint64_t> one(1);
  struct Bad {
    std::uint64_t group_rows, first;
    const char* says;
  };
  for (const Bad& b : {Bad{0, 0, "which has 0 such groups"}, Bad{16, 63, "which has 63 such"},
                       Bad{4, 250, "which has 250 such"}, Bad{16, 64, "which has 63 such"}}) {
    const Status st = (*entry)->GroupHashes(b.group_rows, b.first, one);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b.group_rows << " " << b.first;
    EXPECT_NE(st.message().find(std::string("of table 'words', ") + b.says), std::string::npos)
        << st.message();
  }

  // A new version of the table gets its own.
  TableSpec v2 = spec_;
  v2.salt = 9;
  ASSERT_TRUE(WriteTestTable(dir_.File("words.emb"), v2).ok());
  ASSERT_TRUE(catalog_->Refresh().ok());
  const auto fresh = ask(16, 0, std::nullopt);
  EXPECT_EQ(fresh, group_hashes(v2, 16, 0, 1000));
  EXPECT_NE(fresh, group_hashes(spec_, 16, 0, 1000));
}

TEST_F(ServiceTest, StreamsKeysInRowOrder) {
  v1::StreamKeysRequest req;
  req.set_table("words");
  req.set_begin_row(10);
  req.set_chunk_bytes(100);
  auto stream = service_->StreamKeys(req);
  ASSERT_TRUE(stream.ok());
  std::uint64_t next = 10;
  int chunks = 0;
  for (;;) {
    auto c = (*stream)->Next();
    ASSERT_TRUE(c.ok());
    if (!*c) break;
    ++chunks;
    EXPECT_EQ((*c)->first_row(), next);
    std::size_t at = 0;
    for (std::uint32_t len : (*c)->key_lengths()) {
      EXPECT_EQ((*c)->key_data().substr(at, len), testing::TestKey(next));
      at += len;
      ++next;
    }
    EXPECT_EQ(at, (*c)->key_data().size());
  }
  EXPECT_EQ(next, 1000u);
  EXPECT_GT(chunks, 50);

  v1::StreamKeysRequest keyless;
  keyless.set_table("plain");
  EXPECT_EQ(service_->StreamKeys(keyless).status().code(), StatusCode::kFailedPrecondition);
  v1::StreamKeysRequest past = req;
  past.set_end_row(5000);
  EXPECT_EQ(service_->StreamKeys(past).status().code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace embstore::server
