// Deltas beside table objects (docs/FORMAT.md, "Deltas"). When a table object is replaced by a
// new version, the rows of the new version that differ from the replaced one are also uploaded,
// as a small table of their own, under the table's key + ".delta". A copy of the old version is
// then brought up to date with one GET of those rows instead of one ranged GET per changed row
// (9,382 GETs for the seed table with 1% of its rows changed at random ids).
//
// A delta is only ever a shortcut: a reader takes a row from it only when the row's bytes hash
// to the new version's stored row hash for the row it needs, so a stale, wrong or damaged delta
// can cost a reader bytes but never give it a wrong row. It lives as long as the version it
// belongs to: the next publication of the table replaces or removes it.
#ifndef EMBSTORE_OBJSTORE_DELTA_H_
#define EMBSTORE_OBJSTORE_DELTA_H_

#include <cstdint>
#include <string>

#include "embstore/common/status.h"
#include "embstore/objstore/object_store.h"

namespace embstore::objstore {

// The delta object of the table object `table`: its key + ".delta".
ObjectUrl DeltaUrl(const ObjectUrl& table);

// A delta holds at most this fraction of its table's rows; beyond it a reader is as well off
// fetching the table.
inline constexpr double kMaxDeltaFraction = 0.25;

struct DeltaFile {
  std::uint64_t rows = 0;  // changed rows written to the file; 0: no delta, `skipped` says why
  std::string skipped;
};

// Writes to `delta_path` the rows of the table file `new_path` whose stored row hashes differ
// from those of the table object `url` at version `previous` (only its header, checksums and row
// hashes are read, through a sparse file at `frame_path`), as a table with row hashes whose
// metadata names both versions. No file (rows 0, `skipped` saying why) when either table has no
// row hashes, their shapes or dtypes differ, nothing changed, or more than kMaxDeltaFraction of
// the rows did. Errors are those of reading the object or writing the file.
Result<DeltaFile> WriteDelta(ObjectStore& store, const ObjectUrl& url, const ObjectInfo& previous,
                             const std::string& new_path, const std::string& frame_path,
                             const std::string& delta_path);

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_DELTA_H_
