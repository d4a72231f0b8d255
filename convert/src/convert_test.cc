// End-to-end tests of Convert(): real files in, table files out, read back with Table.
#include "embstore/convert/convert.h"
#include "embstore/testkit/temp_dir.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
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

namespace embstore::convert {

using namespace embstore::store;
namespace {

namespace fs = std::filesystem;

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_.path(); }

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

  testkit::TempDir temp_{"convert-test"};
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
  EXPECT_EQ(*(*t)->FindKey("#tag"), 2u);
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

// word2vec-binary rows of varying key length (1 to 40 bytes, ASCII and multi-byte UTF-8),
// with and without the line break after each vector: rows end up straddling the read buffer at
// every offset (inside keys, on the separator, inside vectors) when the buffer is small.
struct BinaryRows {
  std::string data;
  std::vector<std::string> keys;
  std::vector<float> values;
};
BinaryRows MakeBinaryRows(int rows, int dim, bool newline_after_vector) {
  BinaryRows b;
  b.data = std::to_string(rows) + " " + std::to_string(dim) + "\n";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> val(-4, 4);
  for (int i = 0; i < rows; ++i) {
    std::string key = "k" + std::to_string(i);
    const int pad = i % 40;
    for (int j = 0; j < pad; ++j) key += (j % 7 == 3 && j + 1 < pad) ? "\xc3\xa9" : "x";
    if (i % 11 == 5) key = "\xe6\x97\xa5\xe6\x9c\xac" + key;  // non-ASCII start
    b.keys.push_back(key);
    b.data += key + " ";
    for (int c = 0; c < dim; ++c) {
      // Values whose bytes include '\n', ' ' and '\r' (0x0a, 0x20, 0x0d) now and then.
      float v = (c % 5 == 0) ? std::bit_cast<float>(0x0a200d0au + static_cast<unsigned>(i))
                             : val(rng);
      b.values.push_back(v);
      b.data.append(reinterpret_cast<const char*>(&v), 4);
    }
    if (newline_after_vector) b.data += "\n";
  }
  return b;
}

TEST_F(ConvertTest, Word2VecBinaryRowsStraddlingEveryBufferBoundary) {
  for (bool newline : {true, false}) {
    BinaryRows b = MakeBinaryRows(300, 5, newline);
    std::string in = Write("b.bin", b.data);
    for (std::size_t chunk : {1u, 7u, 24u, 25u, 31u, 64u, 97u, 4096u, 0u}) {
      ConvertOptions o;
      o.chunk_bytes = chunk;
      o.overwrite = true;
      // Detection looks at the bytes after the header in the first chunk; tiny chunks hold none.
      if (chunk != 0 && chunk < 4096) o.format = InputFormat::kWord2VecBinary;
      auto r = Conv(in, Out(), o);
      ASSERT_TRUE(r.ok()) << "chunk " << chunk << ": " << r.status().ToString();
      EXPECT_EQ(r->format, InputFormat::kWord2VecBinary);
      EXPECT_EQ(r->input_bytes, b.data.size());
      auto got = ReadAll(Out());
      ASSERT_EQ(got.size(), b.values.size());
      EXPECT_EQ(std::memcmp(got.data(), b.values.data(), got.size() * 4), 0)
          << "chunk " << chunk << " newline " << newline;
      auto t = Table::Open(Out());
      ASSERT_TRUE(t.ok());
      for (std::size_t i = 0; i < b.keys.size(); ++i) {
        ASSERT_EQ((*t)->Key(i), b.keys[i]) << "row " << i << " chunk " << chunk;
      }
    }
  }
}

TEST_F(ConvertTest, Word2VecBinaryFromGzipAndStdinMatchesThePlainFile) {
  BinaryRows b = MakeBinaryRows(2000, 64, false);  // ~0.6 MB: several refills of the reader
  std::string plain = Write("b.bin", b.data);
  std::string gz = WriteGzip("b.bin.gz", b.data);
  ASSERT_TRUE(Conv(plain, Out("plain.emb")).ok());
  auto r = Conv(gz, Out("gz.emb"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->gzip);
  // Standard input: the file on fd 0 for the duration of the call.
  int saved = ::dup(0);
  FILE* f = std::fopen(plain.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  ::dup2(::fileno(f), 0);
  auto rs = Conv("-", Out("stdin.emb"));
  ::dup2(saved, 0);
  ::close(saved);
  std::fclose(f);
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  for (const char* name : {"plain.emb", "gz.emb", "stdin.emb"}) {
    auto got = ReadAll(Out(name));
    ASSERT_EQ(got.size(), b.values.size()) << name;
    EXPECT_EQ(std::memcmp(got.data(), b.values.data(), got.size() * 4), 0) << name;
    auto t = Table::Open(Out(name));
    ASSERT_TRUE(t.ok());
    EXPECT_EQ((*t)->Key(1999), b.keys[1999]) << name;
    EXPECT_EQ(*(*t)->FindKey(b.keys[1234]), 1234u) << name;
  }
}

TEST_F(ConvertTest, Word2VecBinaryErrorsNameRowAndByteOffset) {
  BinaryRows b = MakeBinaryRows(50, 4, true);
  // Row 31 (1-based) repeats the key of row 3.
  std::string data = "50 4\n";
  std::uint64_t dup_offset = 0;
  for (int i = 0; i < 50; ++i) {
    if (i == 30) dup_offset = data.size();
    data += (i == 30 ? b.keys[2] : b.keys[i]) + " ";
    data.append(reinterpret_cast<const char*>(b.values.data() + i * 4), 16);
    data += "\n";
  }
  auto r = Conv(Write("dup.bin", data), Out(), ConvertOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dup.bin: word2vec-binary row 31 (byte " +
                                      std::to_string(dup_offset) + "): duplicate key '" +
                                      b.keys[2] + "' (first at row 3"),
            std::string::npos)
      << r.status().message();
  // First wins: the duplicate row is dropped and every other row keeps its own vector.
  ConvertOptions first;
  first.on_duplicate_key = DuplicateKeyPolicy::kFirst;
  first.chunk_bytes = 13;
  r = Conv(Write("dup.bin", data), Out(), first);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto got = ReadAll(Out());
  ASSERT_EQ(got.size(), 49u * 4);
  EXPECT_EQ(std::memcmp(got.data(), b.values.data(), 30 * 16), 0);
  EXPECT_EQ(std::memcmp(got.data() + 30 * 4, b.values.data() + 31 * 4, 19 * 16), 0);

  // Truncated inside a vector: the row, its byte offset and how many bytes were left.
  std::string cut = b.data.substr(0, b.data.size() - 10);
  r = Conv(Write("cut.bin", cut), Out("cut.emb"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cut.bin: word2vec-binary row 50 (byte "),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("expected 16 bytes of values"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(Leftovers().empty() || Leftovers() == std::vector<std::string>{"out.emb"});
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
}  // namespace embstore::convert
