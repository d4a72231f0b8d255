// libFuzzer target for the table reader (built with EMBSTORE_BUILD_FUZZ=ON and clang; see
// docs/FORMAT.md, "Validation").
//
// The input is a whole table file. It is written to an anonymous memory file and opened through
// /proc/self/fd, so Table::Open maps it exactly as it maps a file on disk. Whatever Open accepts is
// then read through every accessor a reader uses: block verification (all blocks, and each block
// once), key checksums, key lookups and row copies. Sanitizers catch any read outside the mapping
// and any arithmetic on header fields that overflows; a crash or an accepted file that makes a
// later accessor misbehave is a finding.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "embstore/store/table.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace embstore::store;
  const int fd = ::memfd_create("table_fuzz", 0);
  if (fd < 0) std::abort();
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<std::size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  auto opened = Table::Open(path);
  if (opened.ok()) {
    const Table& t = **opened;
    (void)t.VerifyAll();
    (void)t.VerifyKeys();
    (void)ContentId(t);
    const std::uint64_t rows = t.rows();
    const std::uint64_t probe = rows < 64 ? rows : 64;
    std::vector<float> out(probe * t.dim());
    if (t.VerifyRows(0, probe).ok()) (void)t.ReadRowsF32(0, probe, out);
    std::vector<std::uint64_t> picks;
    for (std::uint64_t r = 0; r < probe; r += 7) picks.push_back(rows - 1 - r);
    std::vector<std::byte> gathered(picks.size() * t.row_bytes());
    CopyOptions verify;
    verify.verify = true;
    (void)t.GatherRows(picks, gathered, verify);
    if (t.has_keys()) {
      for (std::uint64_t r = 0; r < probe; ++r) {
        const std::string key(t.Key(r));
        (void)t.FindKey(key);
      }
      (void)t.FindKey("no such key");
    }
    if (!t.CheckIntact().ok()) std::abort();  // a memory file cannot shrink under us
  }
  ::close(fd);
  return 0;
}
