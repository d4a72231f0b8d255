#include "embstore/common/scratch_dir.h"

#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <vector>

namespace embstore {

Result<std::unique_ptr<ScratchDir>> ScratchDir::Make(const std::string& purpose) {
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/embstore-" + purpose + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    return Status::FromErrno("create a temporary directory like '" + tmpl + "'", errno);
  }
  // A signal between mkdtemp and the registration would leave the empty directory: a window of
  // two calls, against the whole transfer before.
  return std::unique_ptr<ScratchDir>(new ScratchDir(buf.data()));
}

ScratchDir::ScratchDir(std::string path) : path_(std::move(path)), on_signal_(path_, true) {}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string ScratchDir::File(const std::string& name) {
  std::string p = path_ + "/" + name;
  files_.push_back(std::make_unique<RemoveOnSignal>(p, false));
  return p;
}

}  // namespace embstore
