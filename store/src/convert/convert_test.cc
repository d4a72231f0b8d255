// End-to-end tests of Convert(): real files in, table files out, read back with Table.
#include "embstore/store/convert.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "embstore/store/table.h"

namespace embstore::store {
namespace {

namespace fs = std::filesystem;

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/embstore_convert_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string WriteGzip(const std::string& name, const std::string& content) {
    std::string path = dir_ + "/" + name;
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
    gzclose(f);
    return path;
  }
  std::string Out(const std::string& name = "out.emb") { return dir_ + "/" + name; }
  // Files in the directory other than inputs: nothing may be left behind after a failure.
  std::vector<std::string> Leftovers() {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir_)) {
      std::string n = e.path().filename().string();
      if (n.find(".emb") != std::string::npos) v.push_back(n);
    }
    return v;
  }
  std::vector<float> ReadAll(const std::string& path) {
    auto t = Table::Open(path);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok()) return {};
    std::vector<float> v((*t)->rows() * (*t)->dim());
    EXPECT_TRUE((*t)->ReadRowsF32(0, (*t)->rows(), v).ok());
    return v;
  }

  std::string dir_;
};

ConvertOptions WithFormat(InputFormat f) {
  ConvertOptions o;
  o.format = f;
  return o;
}
ConvertOptions WithDelimiter(char d) {
  ConvertOptions o;
  o.delimiter = d;
  return o;
}

Result<ConvertStats> Conv(const std::string& in, const std::string& out, ConvertOptions o = {}) {
  return Convert(in, out, o);
}

TEST_F(ConvertTest, ConvertsASavetxtMatrix) {
  std::string in = Write("m.txt", "# header comment\n1.0 2.5 -3\n\n4e0\t5 6 # trailing\n");
  auto r = Conv(in, Out());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rows, 2u);
  EXPECT_EQ(r->dim, 3u);
  EXPECT_EQ(r->format, InputFormat::kMatrix);
  EXPECT_EQ(ReadAll(Out()), (std::vector<float>{1, 2.5f, -3, 4, 5, 6}));
  auto t = Table::Open(Out());
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE((*t)->has_keys());
}

TEST_F(ConvertTest, DetectsWord2VecTextAndKeepsKeysInOrder) {
  std::string in = Write("v.vec", "3 2\nthe 0.1 0.2 \ncaf\xc3\xa9 1 2\n#tag -1 -2\n");
  auto r = Conv(in, Out());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kWord2Vec);
  EXPECT_NE(r->format_note.find("word2vec"), std::string::npos);
  auto t = Table::Open(Out());
  ASSERT_TRUE(t.ok());
  ASSERT_EQ((*t)->rows(), 3u);
  EXPECT_EQ((*t)->Key(0), "the");
  EXPECT_EQ((*t)->Key(1), "caf\xc3\xa9");
  EXPECT_EQ((*t)->Key(2), "#tag");
  EXPECT_EQ((*t)->FindKey("#tag"), 2u);
}

TEST_F(ConvertTest, DetectsGloveWithoutHeader) {
  std::string in = Write("g.txt", "the 0.5 1.5\nof 2 3\n");
  auto r = Conv(in, Out());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kGlove);
  EXPECT_EQ(ReadAll(Out()), (std::vector<float>{0.5f, 1.5f, 2, 3}));
}

TEST_F(ConvertTest, ReadsWord2VecBinary) {
  std::string data = "2 3\n";
  float a[3] = {1.5f, -2, 3.25f};
  float b[3] = {0, 1e-3f, 7};
  data += "hello ";
  data.append(reinterpret_cast<const char*>(a), 12);
  data += "\nw\xc3\xb6rld ";
  data.append(reinterpret_cast<const char*>(b), 12);
  data += "\n";
  std::string in = Write("v.bin", data);
  auto r = Conv(in, Out());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, InputFormat::kWord2VecBinary);
  EXPECT_EQ(ReadAll(Out()), (std::vector<float>{1.5f, -2, 3.25f, 0, 1e-3f, 7}));
  auto t = Table::Open(Out());
  EXPECT_EQ((*t)->Key(1), "w\xc3\xb6rld");
}

TEST_F(ConvertTest, ReadsGzipInput) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += std::to_string(i) + " " + std::to_string(-i) + "\n";
  std::string in = WriteGzip("m.txt.gz", text);
  ConvertOptions o;
  o.chunk_bytes = 4096;
  o.threads = 3;
  auto r = Conv(in, Out(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->gzip);
  auto v = ReadAll(Out());
  ASSERT_EQ(v.size(), 10000u);
  EXPECT_EQ(v[2 * 4999], 4999.0f);
  EXPECT_EQ(v[2 * 4999 + 1], -4999.0f);
}

TEST_F(ConvertTest, OutputIsTheSameForAnyThreadCountAndChunkSize) {
  std::mt19937_64 rng(5);
  std::string text;
  char buf[64];
  for (int r = 0; r < 3000; ++r) {
    for (int c = 0; c < 17; ++c) {
      std::snprintf(buf, sizeof buf, c % 2 ? "%.18e" : "%.8g",
                    std::normal_distribution<double>(0, 1)(rng));
      text += buf;
      text += c == 16 ? (r % 3 == 0 ? "\r\n" : "\n") : " ";
    }
  }
  std::string in = Write("m.txt", text);
  std::vector<float> first;
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::vector<std::vector<std::byte>> outs;
    for (unsigned threads : {1u, 2u, 4u}) {
      for (std::size_t chunk : {std::size_t{1000}, std::size_t{0}}) {
        ConvertOptions o;
        o.threads = threads;
        o.chunk_bytes = chunk;
        o.dtype = dt;
        o.overwrite = true;
        auto r = Conv(in, Out(), o);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        ASSERT_EQ(r->rows, 3000u);
        auto t = Table::Open(Out());
        ASSERT_TRUE(t.ok());
        auto bytes = (*t)->RowBytes(0, (*t)->rows());
        ASSERT_TRUE(bytes.ok());
        outs.emplace_back(bytes->begin(), bytes->end());
      }
    }
    for (const auto& o : outs) EXPECT_EQ(o, outs[0]);
  }
}

TEST_F(ConvertTest, RaggedRowNamesFileLineAndColumnAndLeavesNothing) {
  std::string in = Write("m.txt", "1 2 3\n4 5 6\n7 8\n");
  auto r = Conv(in, Out());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("m.txt:3:4"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("'7 8'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("row has 2 values, expected 3"), std::string::npos);
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(ConvertTest, BadTokenIsQuotedWithItsColumn) {
  std::string in = Write("m.txt", "1 2\n3 0x1p3\n");
  ConvertOptions o;
  o.chunk_bytes = 2;  // one line a chunk: line numbers must still add up
  o.threads = 2;
  auto r = Conv(in, Out(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("m.txt:2:3: '0x1p3' is not a number"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(ConvertTest, HeaderThatDisagreesWithTheDataIsAnError) {
  auto r = Conv(Write("a.vec", "3 2\na 1 2\nb 3 4\n"), Out());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("says 3 rows, found 2"), std::string::npos)
      << r.status().message();
  r = Conv(Write("b.vec", "2 3\na 1 2\nb 3 4\n"), Out(), WithFormat(InputFormat::kWord2Vec));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b.vec:2:"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("header on line 1"), std::string::npos);
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(ConvertTest, DuplicateKeysFollowThePolicy) {
  std::string in = Write("d.txt", "a 1 1\nb 2 2\na 3 3\nc 4 4\n");
  auto r = Conv(in, Out());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("d.txt:3:1: duplicate key 'a' (first on line 1"),
            std::string::npos)
      << r.status().message();
  ConvertOptions o;
  o.on_duplicate_key = DuplicateKeyPolicy::kFirst;
  r = Conv(in, Out(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(Out()), (std::vector<float>{1, 1, 2, 2, 4, 4}));
  o.on_duplicate_key = DuplicateKeyPolicy::kLast;
  o.overwrite = true;
  r = Conv(in, Out(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(Out()), (std::vector<float>{3, 3, 2, 2, 4, 4}));
  EXPECT_EQ(r->duplicate_keys, 1u);
}

TEST_F(ConvertTest, EmptyOrCommentOnlyInputIsAnError) {
  for (const char* content : {"", "\n\n", "# only\n# comments\n", "  \n"}) {
    auto r = Conv(Write("e.txt", content), Out());
    ASSERT_FALSE(r.ok()) << content;
    EXPECT_NE(r.status().message().find("no data rows"), std::string::npos)
        << r.status().message();
  }
  EXPECT_TRUE(Leftovers().empty());
}

TEST_F(ConvertTest, InvalidUtf8KeyIsAnError) {
  auto r = Conv(Write("u.txt", "ok 1\nb\xff\xfe 2\n"), Out());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("u.txt:2:2: key is not valid UTF-8"), std::string::npos)
      << r.status().message();
}

TEST_F(ConvertTest, OverflowFollowsThePolicy) {
  std::string in = Write("o.txt", "1 70000\n");
  ConvertOptions o;
  o.dtype = DType::kF16;
  auto r = Conv(in, Out(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("o.txt:1:3: '70000' is out of range for F16"),
            std::string::npos)
      << r.status().message();
  o.on_overflow = OverflowPolicy::kInfinity;
  r = Conv(in, Out(), o);
  ASSERT_TRUE(r.ok());
  auto v = ReadAll(Out());
  EXPECT_TRUE(std::isinf(v[1]));
  // f32 overflow is under the same flag.
  r = Conv(Write("o2.txt", "1e39\n"), Out("o2.emb"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("out of range for F32"), std::string::npos);
}

TEST_F(ConvertTest, ExistingOutputIsUntouchedWithoutForceAndReplacedWithIt) {
  std::string out = Write("exists.emb", "precious");
  std::string in = Write("m.txt", "1 2\n");
  auto r = Conv(in, out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAlreadyExists);
  std::ifstream f(out);
  std::string content((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(content, "precious");
  // With --force, a failing conversion still leaves the old file.
  ConvertOptions o;
  o.overwrite = true;
  r = Conv(Write("bad.txt", "1 2\n3\n"), out, o);
  ASSERT_FALSE(r.ok());
  std::ifstream g(out);
  std::string content2((std::istreambuf_iterator<char>(g)), {});
  EXPECT_EQ(content2, "precious");
  r = Conv(in, out, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(out), (std::vector<float>{1, 2}));
}

TEST_F(ConvertTest, DelimiterSkipRowsAndCustomComments) {
  std::string in = Write("c.csv", "a,b,c\nskip me\n 1 , 2,3 // x\n// c\n4,5,6\n");
  ConvertOptions o;
  o.delimiter = ',';
  o.skip_rows = 2;
  o.comments = "//";
  auto r = Conv(in, Out(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(Out()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  r = Conv(Write("e.csv", "1,2,\n"), Out("e.emb"), WithDelimiter(','));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("e.csv:1:5: empty field"), std::string::npos)
      << r.status().message();
}

TEST_F(ConvertTest, CrOnlyLineBreaksAndNoFinalNewline) {
  auto r = Conv(Write("cr.txt", "1 2\r3 4\r\r5 6"), Out());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(ReadAll(Out()), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST_F(ConvertTest, RejectsBadOptionsAsUsageErrors) {
  auto r = Conv(Write("m.txt", "1\n"), Out(), WithDelimiter('.'));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  ConvertOptions o;
  o.metadata["embstore.x"] = "y";
  r = Conv(Write("m2.txt", "1\n"), Out(), o);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace embstore::store
