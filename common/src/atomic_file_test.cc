#include "embstore/common/atomic_file.h"
#include "embstore/testkit/temp_dir.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace embstore {
namespace {

std::string TempDir() { return testkit::ScratchDir("atomic-test"); }

std::string Read(const std::string& path) { return testkit::ReadFileOrEmpty(path); }

int CountEntries(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name) != "." && std::string(e->d_name) != "..") ++n;
  }
  closedir(d);
  return n;
}

TEST(AtomicFile, PublishesOnlyOnCommit) {
  std::string dir = TempDir();
  std::string path = dir + "/out.bin";
  auto f = AtomicFile::Create(path, false);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE((*f)->Append("hello").ok());
  EXPECT_FALSE(PathExists(path));
  ASSERT_TRUE((*f)->Commit().ok());
  EXPECT_EQ(Read(path), "hello");
  EXPECT_EQ(CountEntries(dir), 1);
}

TEST(AtomicFile, AbortLeavesNothingBehind) {
  std::string dir = TempDir();
  {
    auto f = AtomicFile::Create(dir + "/out.bin", false);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Append("partial").ok());
  }  // destroyed without Commit
  EXPECT_EQ(CountEntries(dir), 0);
}

TEST(AtomicFile, RefusesToReplaceWithoutOverwrite) {
  std::string dir = TempDir();
  std::string path = dir + "/out.bin";
  std::ofstream(path) << "old";
  auto f = AtomicFile::Create(path, false);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(f.status().message().find(path), std::string::npos);
  EXPECT_EQ(Read(path), "old");
}

TEST(AtomicFile, RefusesAFileThatAppearedMeanwhile) {
  std::string dir = TempDir();
  std::string path = dir + "/out.bin";
  auto f = AtomicFile::Create(path, false);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("new").ok());
  std::ofstream(path) << "racer";
  Status st = (*f)->Commit();
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Read(path), "racer");
  EXPECT_EQ(CountEntries(dir), 1);
}

TEST(AtomicFile, ReplacesWithOverwrite) {
  std::string dir = TempDir();
  std::string path = dir + "/out.bin";
  std::ofstream(path) << "old";
  auto f = AtomicFile::Create(path, true);
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Append("new").ok());
  EXPECT_EQ(Read(path), "old");
  ASSERT_TRUE((*f)->Commit().ok());
  EXPECT_EQ(Read(path), "new");
}

TEST(AtomicFile, RejectsMissingDirectory) {
  auto f = AtomicFile::Create("/nonexistent-dir-embstore/x.bin", false);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent-dir-embstore"), std::string::npos);
}

// A fatal signal at any moment of Create(), Append() or Abort() leaves no temporary file: the
// name is in the signal handler's registry before the file exists. Many children each create and
// abort files in a tight loop and are killed at a random moment.
TEST(AtomicFile, ASignalAtAnyMomentLeavesNoTemporaryFile) {
  std::string dir = TempDir();
  for (int trial = 0; trial < 60; ++trial) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      RemoveTempFilesOnSignal();
      for (;;) {
        auto f = AtomicFile::Create(dir + "/out.bin", false);
        if (!f.ok()) _exit(3);
        (void)(*f)->Append("x");
      }
    }
    usleep(static_cast<useconds_t>(200 + (trial * 7919) % 3000));
    ASSERT_EQ(kill(pid, SIGTERM), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "trial " << trial << ": status " << status;
    ASSERT_EQ(CountEntries(dir), 0) << "trial " << trial;
  }
}

// A scratch directory registered with RemoveOnSignal goes on a fatal signal together with the
// registered file in it and an AtomicFile's temporary file there; an unregistered one stays.
TEST(RemoveOnSignal, ASignalRemovesRegisteredFilesThenTheirDirectory) {
  std::string dir = TempDir();
  std::string scratch = dir + "/scratch", kept = dir + "/kept";
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    RemoveTempFilesOnSignal();
    if (mkdir(scratch.c_str(), 0700) != 0 || mkdir(kept.c_str(), 0700) != 0) _exit(3);
    RemoveOnSignal dir_guard(scratch, true);
    RemoveOnSignal file_guard(scratch + "/table.emb", false);
    std::ofstream(scratch + "/table.emb") << "data";
    {
      RemoveOnSignal gone(kept, true);  // unregistered again before the signal
    }
    auto f = AtomicFile::Create(scratch + "/out.bin", false);
    if (!f.ok() || !(*f)->Append("x").ok()) _exit(4);
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(5);
    for (;;) pause();
  }
  close(ready[1]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  // SIGTERM: a test runner in the background may have SIGINT ignored, and the handler leaves
  // an ignored signal alone.
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << status;
  EXPECT_FALSE(PathExists(scratch));
  EXPECT_TRUE(PathExists(kept));
}

}  // namespace
}  // namespace embstore
