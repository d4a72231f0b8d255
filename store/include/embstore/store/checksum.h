// Block checksums of the embedding matrix.
//
// A table's matrix is cut into blocks of `block_rows` rows (the last block may be shorter), and the
// file stores one XXH3-64 (seed 0) of each block's bytes exactly as they lie in the file. Any row
// range aligned to blocks can therefore be verified on its own: by the server before it sends, by a
// client after it receives. See docs/FORMAT.md, "Checksums".
#ifndef EMBSTORE_STORE_CHECKSUM_H_
#define EMBSTORE_STORE_CHECKSUM_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "embstore/store/simd.h"

namespace embstore::store {

// XXH3-64 with seed 0 of `bytes`. Thread-safe. Runs xxhash's vector code for simd::ActiveIsa()
// (AVX2 about 1.5-2x the SSE2 baseline); every level gives the same value.
std::uint64_t Checksum64(std::span<const std::byte> bytes);

// Checksum64 with the code of one level (precondition: simd::CpuSupports(isa)), for tests and
// benchmarks that compare the levels.
std::uint64_t Checksum64On(simd::Isa isa, std::span<const std::byte> bytes);

// Target block size in bytes for the automatic choice of block_rows.
inline constexpr std::uint64_t kTargetBlockBytes = 1u << 20;

// The block_rows a writer picks when not told: as many whole rows as fit in kTargetBlockBytes, at
// least one.
std::uint64_t DefaultBlockRows(std::uint64_t row_bytes);

// Groups of rows, as a delta sync compares them (docs/PROTOCOL.md, "Row hashes"): group g of
// `group_rows` rows is rows [g * group_rows, (g + 1) * group_rows) of a table of `rows` rows, the
// last group shorter when group_rows does not divide rows.
struct RowGroup {
  std::uint64_t first;
  std::uint64_t last;
  std::uint64_t size() const { return last - first; }
};
inline RowGroup RowGroupOf(std::uint64_t g, std::uint64_t group_rows, std::uint64_t rows) {
  const std::uint64_t first = g * group_rows;
  return {first, first + group_rows < rows ? first + group_rows : rows};
}

// A group's hash: Checksum64 of its rows' hashes laid end to end as little-endian u64s.
inline std::uint64_t RowGroupHash(std::span<const std::uint64_t> row_hashes) {
  return Checksum64(std::as_bytes(row_hashes));
}

// The rows of `groups` (ascending) whose hash in `hashes` (the groups' row hashes, one group after
// another) differs from the copy's in `local` (one a row), appended to `ids` in row order.
inline void AppendDifferingRows(std::span<const std::uint64_t> groups, std::uint64_t group_rows,
                                std::uint64_t rows, std::span<const std::uint64_t> hashes,
                                std::span<const std::uint64_t> local,
                                std::vector<std::uint64_t>* ids) {
  std::size_t at = 0;
  for (const std::uint64_t g : groups) {
    const RowGroup group = RowGroupOf(g, group_rows, rows);
    for (std::uint64_t r = group.first; r < group.last; ++r) {
      if (local[r] != hashes[at++]) ids->push_back(r);
    }
  }
}

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_CHECKSUM_H_
