#include "embstore/store/names.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace embstore::store {
namespace {

TEST(TableNames, RejectsNamesThatCouldEscapeTheDirectory) {
  const std::vector<std::string> bad_names = {"",
                                              "../etc/passwd",
                                              "a/b",
                                              "/abs",
                                              ".",
                                              "..",
                                              ".hidden",
                                              std::string("nul\0x", 5),
                                              std::string(300, 'a'),
                                              "tab\tname"};
  for (const std::string& bad : bad_names) {
    Status st = ValidateTableName(bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "name: " << bad;
    EXPECT_NE(st.message().find("invalid table name"), std::string::npos);
    EXPECT_EQ(st.message().find('\t'), std::string::npos) << "control characters are shown as '?'";
  }
  EXPECT_TRUE(ValidateTableName("words-2024.v1_final").ok());
  EXPECT_TRUE(ValidateTableName(std::string(250, 'a')).ok());
}

TEST(TableNames, FileNames) {
  EXPECT_EQ(TableNameOfFile("/data/words.emb"), "words");
  EXPECT_EQ(TableNameOfFile("words.emb"), "words");
  EXPECT_EQ(TableNameOfFile("dir/vectors.bin"), "vectors.bin");
  EXPECT_EQ(TableNameOfFile("dir/.emb"), ".emb");
  EXPECT_EQ(TableNameOfFile("a.emb.emb"), "a.emb");
}

TEST(TableNames, DirectoryEntries) {
  EXPECT_EQ(TableNameOfEntry("words.emb"), "words");
  EXPECT_EQ(TableNameOfEntry("v2.1.emb"), "v2.1");
  EXPECT_FALSE(TableNameOfEntry(".hidden.emb"));
  EXPECT_FALSE(TableNameOfEntry(".emb"));
  EXPECT_FALSE(TableNameOfEntry("words.emb.tmp"));
  EXPECT_FALSE(TableNameOfEntry("words.txt"));
  EXPECT_FALSE(TableNameOfEntry("tab\tname.emb"));
}

}  // namespace
}  // namespace embstore::store
