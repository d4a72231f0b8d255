// Table names, as a store directory, a server and every client spell them (docs/PROTOCOL.md,
// "Table names"): the table NAME of a store directory is its file NAME.emb.
#ifndef EMBSTORE_STORE_NAMES_H_
#define EMBSTORE_STORE_NAMES_H_

#include <optional>
#include <string>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore::store {

// The suffix of a table file in a store directory.
inline constexpr std::string_view kTableSuffix = ".emb";

// InvalidArgument "invalid table name '...': why" unless `name` is 1..250 bytes, has no '/', NUL
// or control character and does not start with '.', so that DIR/NAME.emb can only name a file
// directly inside DIR.
Status ValidateTableName(std::string_view name);

// The table name of a file: its last path component without the ".emb" suffix
// ("/data/words.emb" -> "words"; "vectors.bin" stays "vectors.bin").
std::string TableNameOfFile(std::string_view path);

// The table a directory entry holds: NAME for "NAME.emb" with a valid NAME; nothing for any
// other entry (dotfiles, other suffixes, invalid names), which a store directory ignores.
std::optional<std::string> TableNameOfEntry(std::string_view file_name);

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_NAMES_H_
