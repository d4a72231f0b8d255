#include "embstore/common/atomic_file.h"
#include "embstore/testkit/temp_dir.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <vector>

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

// Spares (AtomicFile::AdoptSpare): in a scratch directory on ext4 (TempDir) and on tmpfs, the
// two kinds of disk delta syncs write on here.
std::vector<std::string> SpareDirs() {
  struct Removed {  // the tmpfs directories, removed at exit
    std::vector<std::string> dirs;
    ~Removed() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  };
  static Removed shm_dirs;
  std::vector<std::string> dirs{TempDir()};
  struct stat st;
  char shm[] = "/dev/shm/embstore-atomic-XXXXXX";
  if (::stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && ::mkdtemp(shm) != nullptr) {
    dirs.push_back(shm);
    shm_dirs.dirs.push_back(shm);
  }
  return dirs;
}

ino_t Inode(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

void Write(const std::string& path, const std::string& bytes) { std::ofstream(path) << bytes; }

TEST(AtomicFileSpare, IsWrittenInPlaceThenSwappedWithThePath) {
  for (const std::string& dir : SpareDirs()) {
    const std::string path = dir + "/t.emb", spare = dir + "/.t.emb.spare";
    Write(path, "current version");
    Write(spare, "an older version, longer");
    const ino_t spare_inode = Inode(spare), current_inode = Inode(path);
    auto f = AtomicFile::AdoptSpare(path, spare);
    ASSERT_TRUE(f.ok()) << dir << ": " << f.status().ToString();
    EXPECT_EQ((*f)->temp_path(), spare);
    const std::string next = "the next one";
    ASSERT_TRUE((*f)->WriteAt(0, std::as_bytes(std::span(next.data(), next.size()))).ok());
    ASSERT_TRUE((*f)->Truncate(next.size()).ok());
    EXPECT_EQ(Read(path), "current version");  // nothing seen before Commit
    ASSERT_TRUE((*f)->Commit().ok());
    EXPECT_EQ(Read(path), next);
    EXPECT_EQ(Read(spare), "current version");  // the replaced file is the next spare
    EXPECT_EQ(Inode(path), spare_inode);
    EXPECT_EQ(Inode(spare), current_inode);
    EXPECT_EQ(CountEntries(dir), 2);
  }
}

TEST(AtomicFileSpare, IsNotTakenWhileAnyoneHasItOpenOrMapped) {
  for (const std::string& dir : SpareDirs()) {
    const std::string path = dir + "/t.emb", spare = dir + "/.t.emb.spare";
    Write(path, "current");
    Write(spare, "older");
    const int reader = ::open(spare.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(reader, 0);
    auto f = AtomicFile::AdoptSpare(path, spare);
    ASSERT_FALSE(f.ok()) << dir;
    EXPECT_EQ(f.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(f.status().message().find("open or mapped elsewhere"), std::string::npos)
        << f.status().ToString();
    // A mapping outlives its descriptor and still counts.
    void* map = ::mmap(nullptr, 5, PROT_READ, MAP_SHARED, reader, 0);
    ASSERT_NE(map, MAP_FAILED);
    ::close(reader);
    f = AtomicFile::AdoptSpare(path, spare);
    ASSERT_FALSE(f.ok()) << dir;
    EXPECT_EQ(f.status().code(), StatusCode::kUnavailable);
    ::munmap(map, 5);
    f = AtomicFile::AdoptSpare(path, spare);
    ASSERT_TRUE(f.ok()) << dir << ": " << f.status().ToString();
    f = Status::Cancelled("let go");  // (reading it while it is held would wait for the lease)
    EXPECT_EQ(Read(spare), "older");  // a refused spare was not touched
  }
}

// Someone who opens the spare while it is written waits for the lease (an O_NONBLOCK open fails
// at once, and breaks it all the same); Commit then swaps nothing, and the writer goes on with a
// new file.
TEST(AtomicFileSpare, OneOpenedWhileItWasWrittenIsNotSwappedIn) {
  for (const std::string& dir : SpareDirs()) {
    const std::string path = dir + "/t.emb", spare = dir + "/.t.emb.spare";
    Write(path, "current");
    Write(spare, "older");
    auto f = AtomicFile::AdoptSpare(path, spare);
    ASSERT_TRUE(f.ok()) << dir << ": " << f.status().ToString();
    ASSERT_TRUE((*f)->WriteAt(0, std::as_bytes(std::span("new", 3))).ok());
    const int opener = ::open(spare.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    EXPECT_EQ(opener, -1);
    EXPECT_EQ(errno, EWOULDBLOCK);
    const Status st = (*f)->Commit();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find("was opened by another process while it was written"),
              std::string::npos) << st.ToString();
    EXPECT_EQ(Read(path), "current");
    EXPECT_TRUE(PathExists(spare));  // left as it is: a spare is only ever hashed
  }
}

TEST(AtomicFileSpare, OnlyASpareOfItsOwnIsTaken) {
  for (const std::string& dir : SpareDirs()) {
    const std::string path = dir + "/t.emb", spare = dir + "/.t.emb.spare";
    Write(path, "current");
    auto none = AtomicFile::AdoptSpare(path, spare);
    EXPECT_EQ(none.status().code(), StatusCode::kNotFound) << none.status().ToString();
    // The file itself, under a second name: written in place, its readers would see the writes.
    ASSERT_EQ(::link(path.c_str(), spare.c_str()), 0);
    auto linked = AtomicFile::AdoptSpare(path, spare);
    EXPECT_EQ(linked.status().code(), StatusCode::kUnavailable);
    EXPECT_NE(linked.status().message().find("has 2 names"), std::string::npos)
        << linked.status().ToString();
    ::unlink(spare.c_str());
    ASSERT_EQ(::mkdir(spare.c_str(), 0700), 0);
    auto directory = AtomicFile::AdoptSpare(path, spare);
    EXPECT_EQ(directory.status().code(), StatusCode::kUnavailable);
    ::rmdir(spare.c_str());
    ASSERT_EQ(::symlink(path.c_str(), spare.c_str()), 0);
    auto symlink = AtomicFile::AdoptSpare(path, spare);
    EXPECT_EQ(symlink.status().code(), StatusCode::kUnavailable) << symlink.status().ToString();
    EXPECT_NE(symlink.status().message().find("is a symbolic link, not a file"), std::string::npos)
        << symlink.status().ToString();
    ::unlink(spare.c_str());
    EXPECT_EQ(Read(path), "current");
  }
}

TEST(AtomicFileSpare, AbortLeavesTheSpareAndThePath) {
  for (const std::string& dir : SpareDirs()) {
    const std::string path = dir + "/t.emb", spare = dir + "/.t.emb.spare";
    Write(path, "current");
    Write(spare, "older");
    {
      auto f = AtomicFile::AdoptSpare(path, spare);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      ASSERT_TRUE((*f)->WriteAt(0, std::as_bytes(std::span("NEW", 3))).ok());
    }
    EXPECT_EQ(Read(path), "current");
    EXPECT_EQ(Read(spare), "NEWer");
    // And the lease went with it: the spare can be taken again.
    EXPECT_TRUE(AtomicFile::AdoptSpare(path, spare).ok());
  }
}

TEST(AtomicFile, KeepReplacedAsKeepsTheFileItReplaces) {
  for (const std::string& dir : SpareDirs()) {
    const std::string path = dir + "/t.emb", spare = dir + "/.t.emb.spare";
    Write(path, "v1");
    Write(spare, "v0");
    const ino_t v1 = Inode(path);
    auto f = AtomicFile::Create(path, true);
    ASSERT_TRUE(f.ok());
    (*f)->KeepReplacedAs(spare);
    ASSERT_TRUE((*f)->Append("v2").ok());
    ASSERT_TRUE((*f)->Commit().ok());
    EXPECT_EQ(Read(path), "v2");
    EXPECT_EQ(Read(spare), "v1");
    EXPECT_EQ(Inode(spare), v1);
    EXPECT_EQ(CountEntries(dir), 2);  // no link left under a temporary name
    // Nothing to keep when nothing was there.
    ::unlink(path.c_str());
    ::unlink(spare.c_str());
    auto first = AtomicFile::Create(path, true);
    ASSERT_TRUE(first.ok());
    (*first)->KeepReplacedAs(spare);
    ASSERT_TRUE((*first)->Append("v3").ok());
    ASSERT_TRUE((*first)->Commit().ok());
    EXPECT_EQ(Read(path), "v3");
    EXPECT_FALSE(PathExists(spare));
    // A symbolic link at the path is replaced, not kept: the spare stays what it was, and the
    // file the link named is left alone.
    const std::string target = dir + "/elsewhere.emb";
    Write(target, "v4");
    Write(spare, "v0");
    ::unlink(path.c_str());
    ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
    auto over_link = AtomicFile::Create(path, true);
    ASSERT_TRUE(over_link.ok());
    (*over_link)->KeepReplacedAs(spare);
    ASSERT_TRUE((*over_link)->Append("v5").ok());
    ASSERT_TRUE((*over_link)->Commit().ok());
    struct stat st;
    ASSERT_EQ(::lstat(spare.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(Read(spare), "v0");
    ASSERT_EQ(::lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(Read(path), "v5");
    EXPECT_EQ(Read(target), "v4");
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
