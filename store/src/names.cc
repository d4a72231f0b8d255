#include "embstore/store/names.h"

namespace embstore::store {

Status ValidateTableName(std::string_view name) {
  auto bad = [&](const char* why) {
    std::string shown(name.substr(0, 80));
    for (char& ch : shown) {
      if (static_cast<unsigned char>(ch) < 0x20) ch = '?';
    }
    return Status::InvalidArgument("invalid table name '" + shown + "': " + why);
  };
  if (name.empty()) return bad("empty");
  if (name.size() > 250) return bad("longer than 250 bytes");
  if (name.front() == '.') return bad("starts with '.'");
  for (char ch : name) {
    if (ch == '/') return bad("contains '/'");
    if (ch == '\0') return bad("contains a NUL byte");
    if (static_cast<unsigned char>(ch) < 0x20) return bad("contains a control character");
  }
  return Status::OK();
}

std::string TableNameOfFile(std::string_view path) {
  std::string_view base = path.substr(path.find_last_of('/') + 1);
  if (base.size() > kTableSuffix.size() && base.ends_with(kTableSuffix)) {
    base.remove_suffix(kTableSuffix.size());
  }
  return std::string(base);
}

std::optional<std::string> TableNameOfEntry(std::string_view file_name) {
  if (file_name.size() <= kTableSuffix.size() || !file_name.ends_with(kTableSuffix)) {
    return std::nullopt;
  }
  std::string_view name = file_name.substr(0, file_name.size() - kTableSuffix.size());
  if (!ValidateTableName(name).ok()) return std::nullopt;
  return std::string(name);
}

}  // namespace embstore::store
