// TableDesc: a table's description, the one vocabulary for it everywhere. A local table file
// (DescribeTable), the server's catalog (which describes its tables the same way and sends them
// as v1::TableInfo, proto/table_info.h) and every RowSource hand out this struct.
#ifndef EMBSTORE_STORE_TABLE_DESC_H_
#define EMBSTORE_STORE_TABLE_DESC_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "embstore/common/file_identity.h"
#include "embstore/store/dtype.h"

namespace embstore::store {

class Table;

// Where a table's file lives on the host that described it (PROTOCOL.md, "Local fast path").
struct ServerFile {
  std::string path;
  FileIdentity identity;
};

struct TableDesc {
  std::string name;
  std::uint64_t rows = 0;
  std::uint64_t dim = 0;
  DType dtype = DType::kF32;
  std::uint64_t row_bytes = 0;
  std::uint64_t content_id = 0;
  std::uint64_t generation = 0;  // the server's count of versions it has served (0: a file)
  std::uint64_t block_rows = 0;
  std::uint64_t num_blocks = 0;
  bool has_keys = false;
  std::uint64_t key_bytes = 0;
  int format_version = 0;
  std::uint64_t data_offset = 0;                // where the matrix starts in the file
  std::map<std::string, std::string> metadata;  // user metadata
  std::optional<ServerFile> file;
};

// The description of an open table, named `name`, with the content id ContentId(table) gives
// (`content_id` when the caller has it already). No generation and no file: the caller knows
// where the table came from.
TableDesc DescribeTable(const Table& table, std::string name);
TableDesc DescribeTable(const Table& table, std::string name, std::uint64_t content_id);

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_TABLE_DESC_H_
