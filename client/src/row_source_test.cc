// Every RowSource kind (a file, a server streamed and read locally, a sharded manifest) asked for
// the same row ranges and keys must give the same bytes; a file source reads with pread, verifies
// in parallel, and reports corruption and truncation by name.
#include "embstore/client/row_source.h"
#include "embstore/client/open_source.h"
#include "embstore/testkit/temp_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <thread>

#include "embstore/client/sharded.h"
#include "embstore/client/update.h"
#include "embstore/server/server.h"
#include "test_tables.h"
#include "embstore/store/checksum.h"
#include "embstore/store/dtype.h"
#include "embstore/store/writer.h"

namespace embstore::client {
namespace {

using store::DType;

class RowSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_.path(); }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::milliseconds(0));
  }

  // A table of rows x dim random values (rounded to dtype), keys "key<row>".
  std::string Write(const std::string& name, std::uint64_t rows, std::uint64_t dim, DType dtype,
                    std::uint64_t block_rows) {
    const std::string path = dir_ + "/" + name + ".emb";
    testing::WriteRandomTable(path, rows, dim, dtype, true, block_rows,
                              static_cast<unsigned>(rows * 31 + dim));
    return path;
  }
  static std::string Key(std::uint64_t r) { return testing::TestKey(r); }

  void Serve() {
    auto s = testing::StartTestServer(dir_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
  }
  ConnectOptions Connect() const {
    ConnectOptions c;
    c.target = server_->addresses()[0];
    return c;
  }
  // dir_/m.json: table `table` of rows x dim `dtype` over `shards`.
  void WriteManifest(const std::string& table, std::uint64_t rows, std::uint64_t dim, DType dtype,
                     std::vector<ShardSpec> shards) const {
    ShardManifest m;
    m.origin = "m.json";
    m.table = table;
    m.rows = rows;
    m.dim = dim;
    m.dtype = dtype;
    m.shards = std::move(shards);
    std::ofstream(dir_ + "/m.json") << FormatShardManifest(m);
  }
  // The table file `path`, served as `table`: as a file source, a server source that reads the
  // file locally, and one that streams.
  std::vector<std::unique_ptr<RowSource>> FileAndServerSources(const std::string& path,
                                                               const std::string& table) const {
    std::vector<std::unique_ptr<RowSource>> sources;
    sources.push_back(*OpenFileSource(path));
    sources.push_back(*OpenServerSource(Connect(), table, /*allow_local=*/true));
    sources.push_back(*OpenServerSource(Connect(), table, /*allow_local=*/false));
    return sources;
  }

  // The bytes rows [b, e) should read as: from the mapped table, converted when asked.
  static std::vector<std::byte> Expected(const std::string& path, std::uint64_t b,
                                         std::uint64_t e, bool to_f32) {
    auto t = *store::Table::Open(path);
    auto raw = *t->RowBytes(b, e);
    if (!to_f32) return {raw.begin(), raw.end()};
    std::vector<std::byte> out((e - b) * t->dim() * 4);
    store::ConvertToF32(t->dtype(), raw,
                        std::span<float>(reinterpret_cast<float*>(out.data()), out.size() / 4));
    return out;
  }

  std::vector<std::byte> Read(RowSource& s, std::uint64_t b, std::uint64_t e,
                              const ReadOptions& o, Status* st = nullptr) {
    std::vector<std::byte> out(*s.OutputBytes(b, e, o.to_f32));
    auto r = s.CopyRows(b, e, out, o);
    if (st) {
      *st = r.status();
    } else {
      EXPECT_TRUE(r.ok()) << r.status().ToString();
    }
    return out;
  }

  testkit::TempDir temp_{"rowsource-test"};
  std::string dir_;
  std::unique_ptr<server::Server> server_;
};

TEST_F(RowSourceTest, EveryKindReadsTheSameBytesForAnyRangeAndThreadCount) {
  const std::string path = Write("t", 3000, 24, DType::kF16, 100);
  Serve();
  std::vector<std::unique_ptr<RowSource>> sources = FileAndServerSources(path, "t");
  WriteManifest("t", 3000, 24, DType::kF16,
                {{0, 3000, server_->addresses()[0], "t", std::nullopt}});
  SourceOptions so;
  so.connect = Connect();
  sources.push_back(*OpenShardedSource(dir_ + "/m.json", so));
  EXPECT_EQ(sources[0]->kind(), "file");
  EXPECT_EQ(sources[1]->kind(), "server");
  EXPECT_EQ(sources[3]->kind(), "sharded");
  for (auto& s : sources) {
    EXPECT_EQ(s->desc().rows, 3000u);
    EXPECT_EQ(s->desc().dtype, DType::kF16);
    for (auto [b, e] : {std::pair<std::uint64_t, std::uint64_t>{0, 3000}, {17, 2950}, {100, 200},
                        {2999, 3000}, {5, 5}}) {
      for (bool to_f32 : {false, true}) {
        for (int threads : {1, 3}) {
          ReadOptions o;
          o.to_f32 = to_f32;
          o.streams = threads;
          EXPECT_EQ(Read(*s, b, e, o), Expected(path, b, e, to_f32))
              << s->kind() << " " << b << ":" << e << " f32 " << to_f32 << " threads " << threads;
        }
      }
    }
  }
}

// A RowSink into memory that records how it was called.
class MemorySink final : public RowSink {
 public:
  MemorySink(std::uint64_t size, bool ordered) : bytes_(size), ordered_(ordered) {}
  bool ordered() const override { return ordered_; }
  Status WriteAt(std::uint64_t offset,
                 std::span<const std::span<const std::byte>> pieces) override {
    std::lock_guard<std::mutex> l(mu_);
    ++calls_;
    if (fail_at_call_ == calls_) return Status::IOError("write 'out': No space left on device");
    if (offset < next_) out_of_order_ = true;
    for (auto p : pieces) {
      EXPECT_LE(offset + p.size(), bytes_.size());
      std::memcpy(bytes_.data() + offset, p.data(), p.size());
      offset += p.size();
    }
    next_ = offset;
    return Status::OK();
  }

  std::vector<std::byte> bytes_;
  bool ordered_;
  std::mutex mu_;
  int calls_ = 0;
  int fail_at_call_ = 0;  // this call (1-based) fails
  std::uint64_t next_ = 0;
  bool out_of_order_ = false;
};

TEST_F(RowSourceTest, WriteRowsGivesEverySinkTheSameBytesAsCopyRows) {
  const std::string path = Write("t", 3000, 24, DType::kF16, 100);
  Serve();
  std::vector<std::unique_ptr<RowSource>> sources = FileAndServerSources(path, "t");
  for (auto& s : sources) {
    for (auto [b, e] : {std::pair<std::uint64_t, std::uint64_t>{0, 3000}, {17, 2950}, {100, 200},
                        {2999, 3000}, {5, 5}}) {
      for (bool to_f32 : {false, true}) {
        for (bool ordered : {false, true}) {
          ReadOptions o;
          o.to_f32 = to_f32;
          o.streams = 3;
          o.chunk_bytes = 1000;  // chunks of 20 rows: pieces of the 100-row blocks
          std::uint64_t last_done = 0;
          o.progress = [&](std::uint64_t done, std::uint64_t total) {
            EXPECT_EQ(total, *s->OutputBytes(b, e, to_f32));
            EXPECT_GE(done, last_done);
            last_done = done;
            return true;
          };
          MemorySink sink(*s->OutputBytes(b, e, to_f32), ordered);
          auto st = s->WriteRows(b, e, sink, o);
          ASSERT_TRUE(st.ok()) << s->kind() << ": " << st.status().ToString();
          EXPECT_EQ(st->rows, e - b);
          EXPECT_EQ(last_done, sink.bytes_.size());
          EXPECT_EQ(sink.bytes_, Expected(path, b, e, to_f32))
              << s->kind() << " " << b << ":" << e << " f32 " << to_f32 << " ordered " << ordered;
          if (ordered) {
            EXPECT_FALSE(sink.out_of_order_);
          }
        }
      }
    }
  }
}

TEST_F(RowSourceTest, StreamedWriteRowsRefetchesACorruptChunkAndStopsAtAFailedWrite) {
  const std::string path = Write("t", 2000, 16, DType::kF32, 50);
  Serve();
  auto src = *OpenServerSource(Connect(), "t", /*allow_local=*/false);
  const std::vector<std::byte> want = Expected(path, 0, 2000, false);
  // A byte of block 21 flipped in the server's file, put back once the client has noticed.
  const std::uint64_t at = (*store::Table::Open(path))->data_offset() + 1077 * 64 + 9;
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  unsigned char orig, bad;
  ASSERT_EQ(::pread(fd, &orig, 1, at), 1);
  bad = orig ^ 0x21;
  ASSERT_EQ(::pwrite(fd, &bad, 1, at), 1);
  ReadOptions o;
  o.streams = 2;
  o.chunk_bytes = 20000;
  o.initial_backoff = std::chrono::milliseconds(300);
  bool noticed = false;
  o.on_event = [&](const LoadEvent& e) {
    if (e.kind != LoadEvent::Kind::kBadChunk) return;
    noticed = true;
    EXPECT_NE(e.message.find("block 21 (rows [1050, 1100))"), std::string::npos) << e.message;
    EXPECT_EQ(::pwrite(fd, &orig, 1, at), 1);
  };
  MemorySink sink(want.size(), /*ordered=*/false);
  auto st = src->WriteRows(0, 2000, sink, o);
  ::close(fd);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(noticed);
  EXPECT_GE(st->bad_chunks, 1);
  EXPECT_EQ(sink.bytes_, want);

  // A write the output refuses ends the read with that error, without retries.
  MemorySink full(want.size(), /*ordered=*/false);
  full.fail_at_call_ = 3;
  int resumes = 0;
  o.on_event = [&](const LoadEvent& e) { resumes += e.kind == LoadEvent::Kind::kResume; };
  auto failed = src->WriteRows(0, 2000, full, o);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kIOError);
  EXPECT_NE(failed.status().message().find("No space left on device"), std::string::npos);
  EXPECT_EQ(resumes, 0);
}

TEST_F(RowSourceTest, KeysAndKeyLookupsFromFilesAndServers) {
  const std::string path = Write("t", 500, 8, DType::kF32, 64);
  Serve();
  std::vector<std::unique_ptr<RowSource>> sources = FileAndServerSources(path, "t");
  const std::vector<std::string> keys{"key7", "nope", "key499", "key0", "also-nope"};
  for (auto& s : sources) {
    std::vector<std::byte> out(keys.size() * 32, std::byte{0x55});
    auto r = s->CopyKeys(keys, out, ReadOptions());
    ASSERT_TRUE(r.ok()) << s->kind() << ": " << r.status().ToString();
    EXPECT_EQ(r->missing, (std::vector<std::uint32_t>{1, 4}));
    EXPECT_EQ(std::memcmp(out.data(), Expected(path, 7, 8, false).data(), 32), 0);
    EXPECT_EQ(std::memcmp(out.data() + 64, Expected(path, 499, 500, false).data(), 32), 0);
    EXPECT_EQ(out[32], std::byte{0x55});  // rows of missing keys are left untouched
    auto k = s->Keys(10, 13);
    ASSERT_TRUE(k.ok());
    EXPECT_EQ(*k, (std::vector<std::string>{"key10", "key11", "key12"}));
  }
}

TEST_F(RowSourceTest, KeyLookupsThroughAManifestFindEachKeyOnItsShard) {
  // One 500-row table split over three shard tables whose keys are the logical rows' keys.
  const std::uint64_t bounds[] = {0, 200, 350, 500};
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    paths.push_back(dir_ + "/s" + std::to_string(i) + ".emb");
    testing::WriteRandomTable(paths.back(), bounds[i + 1] - bounds[i], 8, DType::kF16, true, 64,
                              17 + i, bounds[i]);
  }
  Serve();
  std::vector<ShardSpec> shards;
  for (int i = 0; i < 3; ++i) {
    shards.push_back({bounds[i], bounds[i + 1], server_->addresses()[0], "s" + std::to_string(i),
                      std::nullopt});
  }
  WriteManifest("t", 500, 8, DType::kF16, shards);
  // Where each asked key's row lives: (shard, row in it); -1: no shard has it.
  const std::vector<std::string> keys{"key420", "key7", "nope", "key200", "key349", "key0",
                                      "key499", "also-nope", "key7"};
  const std::vector<std::pair<int, std::uint64_t>> at{{2, 70}, {0, 7},   {-1, 0},
                                                      {1, 0},  {1, 149}, {0, 0},
                                                      {2, 149}, {-1, 0}, {0, 7}};
  for (bool local : {false, true}) {
    SourceOptions so;
    so.connect = Connect();
    so.allow_local = local;
    auto src = OpenShardedSource(dir_ + "/m.json", so);
    ASSERT_TRUE(src.ok()) << src.status().ToString();
    ASSERT_TRUE((*src)->desc().has_keys);
    for (bool to_f32 : {false, true}) {
      const std::size_t per_row = to_f32 ? 32 : 16;
      std::vector<std::byte> out(keys.size() * per_row, std::byte{0x55});
      ReadOptions o;
      o.to_f32 = to_f32;
      auto r = (*src)->CopyKeys(keys, out, o);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::vector<std::uint32_t> missing = r->missing;
      std::sort(missing.begin(), missing.end());
      EXPECT_EQ(missing, (std::vector<std::uint32_t>{2, 7}));
      for (std::size_t k = 0; k < keys.size(); ++k) {
        const auto [shard, row] = at[k];
        if (shard < 0) {
          EXPECT_EQ(out[k * per_row], std::byte{0x55}) << keys[k];  // left untouched
          continue;
        }
        EXPECT_EQ(std::memcmp(out.data() + k * per_row,
                              Expected(paths[shard], row, row + 1, to_f32).data(), per_row),
                  0)
            << keys[k] << " local " << local << " f32 " << to_f32;
      }
    }
    std::vector<std::byte> small(3);
    EXPECT_EQ((*src)->CopyKeys(keys, small, ReadOptions()).status().code(),
              StatusCode::kInvalidArgument);
  }
}

TEST_F(RowSourceTest, FileSourceVerifiesInteriorAndCutBlocksAndNamesThem) {
  const std::string path = Write("t", 1000, 16, DType::kF32, 50);
  auto src = *OpenFileSource(path);
  const std::uint64_t data = (*store::Table::Open(path))->data_offset();
  // One flipped bit in row 130 (block 2, rows [100, 150)).
  int fd = ::open(path.c_str(), O_RDWR);
  unsigned char b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(data + 130 * 64 + 9)), 1);
  b ^= 2;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(data + 130 * 64 + 9)), 1);
  ::close(fd);
  for (auto [from, to] : {std::pair<std::uint64_t, std::uint64_t>{0, 1000}, {120, 140},
                          {140, 160}, {100, 150}}) {
    Status st;
    Read(*src, from, to, ReadOptions(), &st);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << from << ":" << to;
    EXPECT_NE(st.message().find("checksum mismatch in block 2 (rows [100, 150))"),
              std::string::npos)
        << st.message();
  }
  // Rows outside the bad block, and an unverified read, are fine.
  Status st;
  Read(*src, 150, 1000, ReadOptions(), &st);
  EXPECT_TRUE(st.ok()) << st.ToString();
  ReadOptions raw;
  raw.verify = false;
  Read(*src, 0, 1000, raw, &st);
  EXPECT_TRUE(st.ok());
}

TEST_F(RowSourceTest, FileTruncatedUnderAFileSourceIsCorruptionNotACrash) {
  const std::string path = Write("t", 20000, 32, DType::kF32, 256);
  auto src = *OpenFileSource(path);
  ASSERT_EQ(::truncate(path.c_str(), 100000), 0);
  Status st;
  Read(*src, 0, 20000, ReadOptions(), &st);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("the file ends at byte"), std::string::npos) << st.message();
}

TEST_F(RowSourceTest, ProgressCancelAndDeadlineOnAFileSource) {
  const std::string path = Write("t", 20000, 32, DType::kF32, 256);
  auto src = *OpenFileSource(path);
  ReadOptions o;
  std::vector<std::uint64_t> seen;
  o.progress = [&](std::uint64_t done, std::uint64_t total) {
    seen.push_back(done);
    EXPECT_EQ(total, 20000u * 128);
    return true;
  };
  Status st;
  Read(*src, 0, 20000, o, &st);
  ASSERT_TRUE(st.ok());
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(seen.front(), 0u);
  EXPECT_EQ(seen.back(), 20000u * 128);
  o.progress = [](std::uint64_t, std::uint64_t) { return false; };
  Read(*src, 0, 20000, o, &st);
  EXPECT_EQ(st.code(), StatusCode::kCancelled);
  ReadOptions late;
  late.timeout = std::chrono::milliseconds(1);
  late.progress = [](std::uint64_t, std::uint64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the deadline passes here
    return true;
  };
  Read(*src, 0, 20000, late, &st);
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
}

TEST_F(RowSourceTest, AServerSourcePinsTheVersionItDescribed) {
  Write("t", 400, 8, DType::kF32, 64);
  Serve();
  auto src = *OpenServerSource(Connect(), "t", /*allow_local=*/false);
  // The table is replaced (by rename, as writers do) with other values.
  std::filesystem::rename(Write("t2", 400, 8, DType::kF32, 32), dir_ + "/t.emb");
  ASSERT_TRUE(server_->RefreshCatalog().ok());
  Status st;
  Read(*src, 0, 400, ReadOptions(), &st);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
  auto fresh = *OpenServerSource(Connect(), "t", false);
  Read(*fresh, 0, 400, ReadOptions(), &st);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST_F(RowSourceTest, AServerSyncLooksUpTheChangedRowsWhileTheCopyIsHashed) {
  // 200,000 rows: four segments of 65,536 rows (Client::RowHashesAgainst), each with a change.
  const std::uint64_t rows = 200000, dim = 4, rb = dim * 4;
  const std::string path = Write("t", rows, dim, DType::kF32, 1024);
  Serve();
  const std::vector<std::byte> table = Expected(path, 0, rows, false);
  auto src = *OpenServerSource(Connect(), "t", /*allow_local=*/false);
  const std::vector<std::uint64_t> changed{5, 70000, 150000, rows - 1};
  std::vector<std::byte> copy = table;
  for (std::uint64_t r : changed) copy[r * rb + 3] ^= std::byte{0x40};
  auto s = UpdateInPlace(*src, copy);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(copy, table);
  EXPECT_EQ(s->changed_rows, changed.size());
  // Each changed row crossed the wire once: looked up while the copy was hashed, then taken from
  // there by CopyRowIds.
  EXPECT_EQ(s->row_bytes_moved, changed.size() * rb);
  EXPECT_EQ(src->transferred_bytes(), s->moved());

  // CopyRowIds takes the rows DigestAgainst looked up and asks the server for the others.
  copy = table;
  for (std::uint64_t r : {std::uint64_t{5}, std::uint64_t{70000}}) copy[r * rb] ^= std::byte{1};
  std::vector<std::uint64_t> hashes(rows);
  for (std::uint64_t r = 0; r < rows; ++r) {
    hashes[r] = store::Checksum64(std::span<const std::byte>(copy).subspan(r * rb, rb));
  }
  std::vector<std::uint64_t> asked;
  auto d = src->DigestAgainst([&](std::uint64_t upto) -> std::span<const std::uint64_t> {
    asked.push_back(upto);
    return hashes;
  });
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(asked, (std::vector<std::uint64_t>{65536, 131072, 196608, rows}));
  EXPECT_EQ(d->groups, (std::vector<std::uint64_t>{0, 70000 / 16}));
  EXPECT_EQ(d->row_bytes, 2 * rb);
  const std::vector<std::uint64_t> ids{5, 6, 70000, 123456};
  std::vector<std::byte> got(ids.size() * rb);
  auto c = src->CopyRowIds(ids, got, ReadOptions());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    EXPECT_TRUE(std::equal(got.begin() + k * rb, got.begin() + (k + 1) * rb,
                           table.begin() + ids[k] * rb))
        << "row " << ids[k];
  }
  EXPECT_EQ(c->wire_bytes, 2 * rb);  // rows 6 and 123456
  // Taken once: asked again, every row comes from the server.
  c = src->CopyRowIds(ids, got, ReadOptions());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->wire_bytes, ids.size() * rb);

  // HoldRowIds hands the looked-up rows over where they arrived, the others in a piece of their
  // own; a file source's come in one piece.
  d = src->DigestAgainst([&](std::uint64_t) -> std::span<const std::uint64_t> { return hashes; });
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  auto file = *OpenFileSource(path);
  for (RowSource* from : {src.get(), file.get()}) {
    HeldRows held;
    auto h = from->HoldRowIds(ids, &held, ReadOptions());
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_EQ(held.rows.size(), ids.size());
    for (std::size_t k = 0; k < ids.size(); ++k) {
      EXPECT_TRUE(std::equal(held.rows[k], held.rows[k] + rb, table.begin() + ids[k] * rb))
          << from->kind() << " row " << ids[k];
    }
    if (from == src.get()) {
      EXPECT_EQ(h->wire_bytes, 2 * rb);
      EXPECT_EQ(held.pieces.size(), 3u);  // two segments looked up, and rows 6 and 123456
    } else {
      EXPECT_EQ(held.pieces.size(), 1u);
    }
  }
}

TEST_F(RowSourceTest, ASyncTakesTheCopysHashesBegunBeforeTheSourceWasOpened) {
  const std::uint64_t rows = 50000, dim = 4, rb = dim * 4;
  const std::string path = Write("t", rows, dim, DType::kF32, 1024);
  Serve();
  const std::vector<std::byte> table = Expected(path, 0, rows, false);
  std::vector<std::byte> copy = table;
  for (std::uint64_t r : {std::uint64_t{7}, std::uint64_t{40000}}) copy[r * rb] ^= std::byte{2};
  EXPECT_EQ(CopyHashes::Start(copy, 0), nullptr);

  // Begun first, then the source opened: the sync uses them.
  auto started = CopyHashes::Start(copy, rb);
  ASSERT_NE(started, nullptr);
  EXPECT_TRUE(started->Covers(copy, rb));
  EXPECT_FALSE(started->Covers(copy, 2 * rb));
  EXPECT_FALSE(started->Covers(std::span<const std::byte>(copy).first(copy.size() - rb), rb));
  auto src = *OpenServerSource(Connect(), "t", /*allow_local=*/false);
  auto s = UpdateInPlace(*src, copy, ReadOptions(), std::move(started));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(copy, table);
  EXPECT_EQ(s->changed_rows, 2u);

  // Hashes of other bytes (or rows of another size) are left aside and the copy hashed afresh:
  // here they would say nothing changed.
  std::vector<std::byte> other = table;
  copy[123 * rb] ^= std::byte{4};
  src = *OpenServerSource(Connect(), "t", false);
  s = UpdateInPlace(*src, copy, ReadOptions(), CopyHashes::Start(other, rb));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(copy, table);
  EXPECT_EQ(s->changed_rows, 1u);

  // Dropped unused (the source could not be opened), they stop.
  for (int i = 0; i < 20; ++i) CopyHashes::Start(copy, rb).reset();
}

}  // namespace
}  // namespace embstore::client
