// Where the read commands (pull, export) put rows: a .npy file or a table file, fed by
// client::RowSource::WriteRows. Both outputs are written atomically (whole, or not at all).
#ifndef EMBSTORE_CLI_TABLE_OUTPUT_H_
#define EMBSTORE_CLI_TABLE_OUTPUT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "embstore/client/row_source.h"
#include "embstore/common/status.h"

namespace embstore::cli {

// --rows "A:B", "A:" or ":B" -> [A, B) of a table of `rows` rows; empty: every row.
Status ParseRows(const std::string& spec, std::uint64_t rows, std::uint64_t* begin,
                 std::uint64_t* end);

// Calls `fn(row, key)` for the keys of rows [begin, end) of `src`, in row order, read in slices
// of 64k rows (each checked against its checksum by the source), so the keys of a table of
// millions of rows are never all held at once. Stops at the first error, `fn`'s included.
Status ForEachKey(client::RowSource& src, std::uint64_t begin, std::uint64_t end,
                  const std::function<Status(std::uint64_t row, const std::string& key)>& fn);

// A RowSink that is finished once every row has been written.
class TableOutput : public client::RowSink {
 public:
  // Completes the output (rows [begin, end) of `src` were written): commits it.
  virtual Status Finish(client::RowSource& src, std::uint64_t begin, std::uint64_t end) = 0;
};

// .npy of `rows` x `dim`, float32 (`f32`) or float16: the header, then the rows as they are,
// each written at its place as it arrives (from several streams at once).
Result<std::unique_ptr<TableOutput>> CreateNpyOutput(const std::string& path, bool overwrite,
                                                     bool f32, std::uint64_t rows,
                                                     std::uint64_t dim);

// A table file of the dtype, block size and user metadata of `desc`, written by the streaming
// writer (which checksums each block again as the rows go by), in row order; with `keys`, the
// keys of the rows are read from the source at Finish.
Result<std::unique_ptr<TableOutput>> CreateTableOutput(const std::string& path, bool overwrite,
                                                       const client::TableDesc& desc, bool keys,
                                                       const std::string& creator);

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_TABLE_OUTPUT_H_
