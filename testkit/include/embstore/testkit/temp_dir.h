// A directory under $TMPDIR (or /tmp) for one test or benchmark, removed with everything in it
// when the object goes away (unless Keep() was called, to look at what a failing test left).
#ifndef EMBSTORE_TESTKIT_TEMP_DIR_H_
#define EMBSTORE_TESTKIT_TEMP_DIR_H_

#include <string>
#include <string_view>

namespace embstore::testkit {

class TempDir {
 public:
  // `prefix` names the directory ("embstore-<prefix>-XXXXXX") so a leftover says who made it.
  // Aborts the process when no directory can be made: nothing else would make sense in a test.
  explicit TempDir(std::string_view prefix = "test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(std::string_view name) const;
  void Keep() { keep_ = true; }

 private:
  std::string path_;
  bool keep_ = false;
};

// A fresh TempDir that lives until the program exits: for tests that only need a path.
std::string ScratchDir(std::string_view prefix = "test");

// Whole-file helpers for tests: the file's bytes ("" when it cannot be read), and a file
// replaced by `bytes`.
std::string ReadFileOrEmpty(const std::string& path);
void WriteFileOrDie(const std::string& path, std::string_view bytes);

}  // namespace embstore::testkit

#endif  // EMBSTORE_TESTKIT_TEMP_DIR_H_
