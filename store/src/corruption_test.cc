// Every rejection path of Table::Open, fed the bad file itself.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "embstore/store/table.h"
#include "test_util.h"

namespace embstore::store {
namespace {

using testing::MakeKeys;
using testing::RandomMatrix;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;
using testing::WriteTable;

class Corruption : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    good_path_ = dir_ + "/good.emb";
    keys_ = MakeKeys(40);
    ASSERT_TRUE(WriteTable(good_path_, RandomMatrix(40, 3, 9), 3, DType::kF32, &keys_, 8).ok());
    good_ = ReadFile(good_path_);
    std::memcpy(&header_len_, good_.data(), 8);
    json_ = nlohmann::ordered_json::parse(good_.substr(8, header_len_));
  }

  // Opens `bytes` written to a file; returns the status.
  Status OpenBytes(const std::string& bytes) {
    std::string path = dir_ + "/bad.emb";
    WriteFile(path, bytes);
    return Table::Open(path).status();
  }

  // The good file with its JSON header replaced (same length, padded with spaces).
  std::string WithHeader(const nlohmann::ordered_json& j) {
    std::string text = j.dump();
    EXPECT_LE(text.size(), header_len_);
    text.resize(header_len_, ' ');
    std::string out = good_;
    out.replace(8, header_len_, text);
    return out;
  }

  // Expects Open of a header edited by `edit` to fail with Corruption mentioning `needle`.
  void ExpectHeaderRejected(const std::function<void(nlohmann::ordered_json&)>& edit,
                            const std::string& needle, StatusCode code = StatusCode::kCorruption) {
    nlohmann::ordered_json j = json_;
    edit(j);
    Status st = OpenBytes(WithHeader(j));
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("bad.emb"), std::string::npos) << st.message();
  }

  std::string dir_, good_path_, good_;
  std::vector<std::string> keys_;
  std::uint64_t header_len_ = 0;
  nlohmann::ordered_json json_;
};

TEST_F(Corruption, GoodFileOpens) { EXPECT_TRUE(OpenBytes(good_).ok()); }

TEST_F(Corruption, RejectsTruncationAtEveryOffset) {
  for (std::size_t n = 0; n < good_.size(); ++n) {
    Status st = OpenBytes(good_.substr(0, n));
    ASSERT_FALSE(st.ok()) << "truncated to " << n << " bytes was accepted";
    ASSERT_EQ(st.code(), StatusCode::kCorruption) << n << ": " << st.ToString();
  }
}

TEST_F(Corruption, RejectsTrailingBytes) {
  Status st = OpenBytes(good_ + "extra");
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("truncated or padded"), std::string::npos) << st.message();
}

TEST_F(Corruption, RejectsWrongHeaderLength) {
  for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, header_len_ - 1, header_len_ + 1,
                          std::uint64_t{good_.size()}, std::uint64_t{1} << 40, ~std::uint64_t{0}}) {
    std::string bad = good_;
    std::memcpy(bad.data(), &n, 8);
    Status st = OpenBytes(bad);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << "header length " << n << ": " << st.ToString();
  }
}

TEST_F(Corruption, RejectsUnalignedMatrix) {
  // Shorten the header by 8 bytes: everything still parses, but the data starts at 4088.
  std::string bad = good_;
  std::uint64_t n = header_len_ - 8;
  std::memcpy(bad.data(), &n, 8);
  std::string text = json_.dump();
  text.resize(n, ' ');
  bad.replace(8, header_len_, text);
  // Shift the offsets so that the tensors still cover the (now longer) data buffer exactly.
  Status st = OpenBytes(bad);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("not a multiple of 4096"), std::string::npos) << st.message();
}

TEST_F(Corruption, RejectsNonJsonHeader) {
  std::string bad = good_;
  bad[8] = '[';
  EXPECT_EQ(OpenBytes(bad).code(), StatusCode::kCorruption);
  bad = good_;
  bad[9] = 'x';
  Status st = OpenBytes(bad);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("JSON does not parse"), std::string::npos) << st.message();
}

TEST_F(Corruption, RejectsHeaderLiesAboutShape) {
  ExpectHeaderRejected([](auto& j) { j["embedding"]["shape"][0] = 41; }, "embedding");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["shape"][1] = 4; }, "embedding");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["shape"] = {120}; }, "dimensions");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["shape"][1] = 0; }, "dim is 0");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["shape"][0] = -1; }, "non-negative");
  ExpectHeaderRejected(
      [](auto& j) {
        j["embedding"]["shape"] = {std::uint64_t{1} << 62, 8};
      },
      "embedding");
}

TEST_F(Corruption, RejectsHeaderLiesAboutDtype) {
  ExpectHeaderRejected([](auto& j) { j["embedding"]["dtype"] = "F16"; }, "embedding");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["dtype"] = "F64"; }, "not one of");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["dtype"] = 3; }, "no dtype");
  ExpectHeaderRejected([](auto& j) { j["checksums"]["dtype"] = "U32"; }, "checksums");
  ExpectHeaderRejected([](auto& j) { j["keys.bytes"]["dtype"] = "I8"; }, "keys.bytes");
}

TEST_F(Corruption, RejectsHeaderLiesAboutOffsets) {
  ExpectHeaderRejected([](auto& j) { j["embedding"]["data_offsets"][1] = 400; }, "");
  ExpectHeaderRejected([](auto& j) { j["checksums"]["data_offsets"][0] = 472; }, "hole");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["data_offsets"] = {10, 5}; }, "ends");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["data_offsets"] = {0}; }, "data_offsets");
  ExpectHeaderRejected([](auto& j) { j["keys.checksums"]["data_offsets"][1] = 1u << 30; },
                       "cover");
  ExpectHeaderRejected([](auto& j) { j["keys.bytes"]["data_offsets"][1] = 1u << 30; }, "hole");
}

TEST_F(Corruption, RejectsMissingOrForeignProfile) {
  ExpectHeaderRejected([](auto& j) { j["__metadata__"].erase("embstore.format"); },
                       "not an embstore table");
  ExpectHeaderRejected([](auto& j) { j["__metadata__"]["embstore.version"] = "x"; },
                       "embstore.version");
  ExpectHeaderRejected([](auto& j) { j["__metadata__"]["embstore.version"] = "4"; },
                       "newer than this embstore reads", StatusCode::kUnimplemented);
  // A version 1 table knows no keys.checksums; a version 2 table with keys needs it.
  ExpectHeaderRejected([](auto& j) { j["__metadata__"]["embstore.version"] = "1"; },
                       "unexpected tensor 'keys.checksums' in a version 1 table");
  ExpectHeaderRejected(
      [](auto& j) {
        j.erase("keys.checksums");  // its 24 bytes now belong to keys.bytes
        j["keys.bytes"]["data_offsets"][1] = j["keys.bytes"]["data_offsets"][1].template get<int>() + 24;
        j["keys.bytes"]["shape"][0] = j["keys.bytes"]["shape"][0].template get<int>() + 24;
      },
      "needs the 'keys.checksums'");
  ExpectHeaderRejected([](auto& j) { j["__metadata__"]["embstore.block_rows"] = "0"; },
                       "block_rows");
  ExpectHeaderRejected([](auto& j) { j["__metadata__"]["embstore.checksum"] = "crc32"; },
                       "unsupported checksum");
  ExpectHeaderRejected([](auto& j) { j["__metadata__"]["n"] = 5; }, "not a string");
  ExpectHeaderRejected([](auto& j) { j.erase("checksums"); }, "");
  ExpectHeaderRejected([](auto& j) { j.erase("keys.index"); }, "");
  ExpectHeaderRejected([](auto& j) { j["extra"] = j["keys.bytes"]; }, "");
}

TEST_F(Corruption, RejectsKeyTablesThatPointOutside) {
  auto t = *Table::Open(good_path_);
  const std::uint64_t base = t->data_offset();
  const std::uint64_t koff = json_["keys.offsets"]["data_offsets"][0].get<std::uint64_t>();
  const std::uint64_t kidx = json_["keys.index"]["data_offsets"][0].get<std::uint64_t>();
  auto poke = [&](std::uint64_t at, std::uint64_t v) {
    std::string bad = good_;
    std::memcpy(bad.data() + base + at, &v, 8);
    return OpenBytes(bad);
  };
  Status st = poke(koff + 8 * 5, 1u << 20);  // key 4 ends far outside the key bytes
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("key of row 4"), std::string::npos) << st.message();
  EXPECT_EQ(poke(koff, 3).code(), StatusCode::kCorruption);
  // An index slot naming a row that does not exist.
  for (std::uint64_t s = 0;; ++s) {
    std::uint64_t v;
    std::memcpy(&v, good_.data() + base + kidx + 8 * s, 8);
    if (v != ~std::uint64_t{0}) {
      st = poke(kidx + 8 * s, 40);
      EXPECT_EQ(st.code(), StatusCode::kCorruption);
      EXPECT_NE(st.message().find("names row 40"), std::string::npos) << st.message();
      break;
    }
  }
  // A full index (no empty slot) would make lookups loop: rejected.
  std::string bad = good_;
  std::uint64_t slots = json_["keys.index"]["shape"][0].get<std::uint64_t>();
  for (std::uint64_t s = 0; s < slots; ++s) {
    std::uint64_t v = s % 40;
    std::memcpy(bad.data() + base + kidx + 8 * s, &v, 8);
  }
  EXPECT_EQ(OpenBytes(bad).code(), StatusCode::kCorruption);
}

TEST_F(Corruption, RandomByteFlipsNeverCrash) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good_;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the header, sometimes anywhere.
      std::size_t at = (rng() % 4) ? rng() % (8 + header_len_) : rng() % bad.size();
      bad[at] = static_cast<char>(rng());
    }
    std::string path = dir_ + "/flip.emb";
    WriteFile(path, bad);
    auto t = Table::Open(path);
    if (!t.ok()) continue;
    // Whatever opened must be safe to read everywhere.
    Status st = (*t)->VerifyAll();
    (void)st;
    for (std::uint64_t r = 0; (*t)->has_keys() && r < (*t)->rows(); ++r) {
      std::string_view k = (*t)->Key(r);
      auto row = (*t)->FindKey(k);
      if (row.ok()) {
        EXPECT_LT(row->value_or(0), (*t)->rows());
      }
    }
  }
}

// The good file with the header text replaced by `text` (padded with spaces to the same length).
TEST_F(Corruption, HeaderPaddingMustBeSpaces) {
  for (char pad : {'\0', '\n', '\t', 'x'}) {
    std::string text = json_.dump();
    text.resize(header_len_, ' ');
    text[header_len_ - 1] = pad;
    std::string bytes = good_;
    bytes.replace(8, header_len_, text);
    Status st = OpenBytes(bytes);
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << int(pad);
    EXPECT_NE(st.message().find("header padding byte"), std::string::npos) << st.message();
  }
  // A NUL inside the JSON (the parser would stop there) is refused too.
  std::string text = json_.dump();
  text.resize(header_len_, ' ');
  text.insert(text.find(',') + 1, std::string(1, '\0'));
  text.resize(header_len_);
  text.back() = ' ';
  std::string bytes = good_;
  bytes.replace(8, header_len_, text);
  EXPECT_EQ(OpenBytes(bytes).code(), StatusCode::kCorruption);
}

TEST_F(Corruption, DeepJsonAndNonUtf8BytesGetPrintableMessages) {
  std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string bytes(8, '\0');
  std::uint64_t n = 4096 * 64 - 8;
  deep.resize(n, ' ');
  std::memcpy(bytes.data(), &n, 8);
  bytes += deep;
  Status st = OpenBytes(bytes);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("nests deeper than"), std::string::npos) << st.message();

  std::string text = json_.dump();
  const std::size_t at = text.find("test");  // the value of the user's metadata "note"
  ASSERT_NE(at, std::string::npos);
  text[at] = '\xff';
  text[at + 1] = '\xfe';
  text.resize(header_len_, ' ');
  std::string bad = good_;
  bad.replace(8, header_len_, text);
  st = OpenBytes(bad);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  for (unsigned char c : st.message()) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << st.message();
  EXPECT_NE(st.message().find("\\xff"), std::string::npos) << st.message();
}

TEST_F(Corruption, NumbersTooLargeForJsonAreCorruptionNotAnUncaughtException) {
  // nlohmann throws out_of_range, not parse_error, for 1E2006 (found by table_fuzz).
  std::string text = json_.dump();
  const std::string shape = "\"shape\":[";
  text.insert(text.find(shape) + shape.size(), "1982E2006,");
  text.resize(header_len_, ' ');
  std::string bad = good_;
  bad.replace(8, header_len_, text);
  Status st = OpenBytes(bad);
  EXPECT_EQ(st.code(), StatusCode::kCorruption);
  EXPECT_NE(st.message().find("number overflow"), std::string::npos) << st.message();
}

TEST_F(Corruption, OverflowingShapesAreCorruptionNotACrash) {
  // [0, 2^62] F32 spans 0 bytes; its row size would wrap to 0 and divide by zero later.
  ExpectHeaderRejected([](auto& j) { j["embedding"]["shape"] = {0, 1ull << 62}; }, "dim");
  ExpectHeaderRejected([](auto& j) { j["embedding"]["shape"] = {1ull << 40, 1ull << 23}; }, "");
  ExpectHeaderRejected(
      [](auto& j) { j["__metadata__"]["embstore.block_rows"] = "18446744073709551615"; }, "");
}

}  // namespace
}  // namespace embstore::store
