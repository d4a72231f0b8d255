// Constants of the table file format. docs/FORMAT.md is the normative spec; every constant here
// names the section of that document it comes from.
#ifndef EMBSTORE_STORE_FORMAT_H_
#define EMBSTORE_STORE_FORMAT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore::store {

// "Layout": the matrix data starts at a multiple of this file offset.
inline constexpr std::uint64_t kDataAlignment = 4096;

// "Layout": the JSON header length field is 8 bytes; headers larger than this are rejected
// (safetensors itself caps headers at 100 MB).
inline constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

// "Profile": the newest version this code reads and writes. Writers use the lowest version that
// holds the table: 3 for tables with row hashes, 2 for tables with keys (keys.checksums), 1 for
// the rest.
inline constexpr int kFormatVersion = 3;
inline constexpr int kFirstVersionWithKeyChecksums = 2;
inline constexpr int kFirstVersionWithRowHashes = 3;

// "Tensors": names of the tensors in the data buffer, in the order they lie there.
inline constexpr std::string_view kTensorEmbedding = "embedding";
inline constexpr std::string_view kTensorChecksums = "checksums";
inline constexpr std::string_view kTensorRowHashes = "row_hashes";  // version 3, optional
inline constexpr std::string_view kTensorKeyOffsets = "keys.offsets";
inline constexpr std::string_view kTensorKeyIndex = "keys.index";
inline constexpr std::string_view kTensorKeyBytes = "keys.bytes";
inline constexpr std::string_view kTensorKeyChecksums = "keys.checksums";  // version 2

// "Metadata": keys of the safetensors __metadata__ map that the embstore profile defines.
inline constexpr std::string_view kMetaFormat = "embstore.format";  // value: kFormatName
inline constexpr std::string_view kFormatName = "embstore-table";
inline constexpr std::string_view kMetaVersion = "embstore.version";
inline constexpr std::string_view kMetaChecksum = "embstore.checksum";  // value: kChecksumName
inline constexpr std::string_view kChecksumName = "xxh3-64";
inline constexpr std::string_view kMetaBlockRows = "embstore.block_rows";
inline constexpr std::string_view kMetaCreated = "embstore.created";  // RFC 3339 UTC
inline constexpr std::string_view kMetaCreator = "embstore.creator";  // e.g. "embstore 0.1.0"
inline constexpr std::string_view kMetaSourceName = "embstore.source.name";
inline constexpr std::string_view kMetaSourceSize = "embstore.source.size";
inline constexpr std::string_view kMetaSourceMtime = "embstore.source.mtime";  // RFC 3339 UTC
// "Deltas": in a delta table, the content ids (16 lowercase hex digits, ContentIdHex) of the table
// version whose changed rows it holds and of the version those rows replaced.
inline constexpr std::string_view kMetaDeltaOf = "embstore.delta.of";
inline constexpr std::string_view kMetaDeltaBase = "embstore.delta.base";
// "Row hashes": XXH3-64 (seed 0) of the row_hashes tensor's bytes, 16 lowercase hex digits
// (ContentIdHex), written with them; optional (tables written before it have none).
inline constexpr std::string_view kMetaRowHashesChecksum = "embstore.row_hashes.checksum";
// Every metadata key outside the "embstore." prefix belongs to the user.
inline constexpr std::string_view kReservedMetaPrefix = "embstore.";

// "Keys": an empty slot of keys.index.
inline constexpr std::uint64_t kEmptySlot = ~std::uint64_t{0};

// "Keys": the longest key, in bytes.
inline constexpr std::uint64_t kMaxKeyBytes = 65535;

// "Tensors": the widest row a table may have, in values, and the largest matrix, in bytes. Both
// are far beyond real tables; they keep every size derived from a header representable.
inline constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 24;
inline constexpr std::uint64_t kMaxMatrixBytes = std::uint64_t{1} << 56;

// The sizes every reader derives from a table's shape, dtype and block size. Headers (a file's,
// or a server's description of one) are hostile input: ComputeGeometry is the one place their
// numbers are multiplied, with overflow checks, so no reader divides by a wrapped zero or sizes a
// buffer from a wrapped product.
struct TableGeometry {
  std::uint64_t rows = 0;
  std::uint64_t dim = 0;
  std::uint64_t row_bytes = 0;     // dim * element size, >= 1
  std::uint64_t matrix_bytes = 0;  // rows * row_bytes
  std::uint64_t block_rows = 0;    // >= 1
  std::uint64_t num_blocks = 0;    // ceil(rows / block_rows)
  std::uint64_t block_bytes = 0;   // min(block_rows, rows) * row_bytes: the largest block
};

// InvalidArgument naming `what` (a file or table) and the field when dim is 0 or above kMaxDim,
// element_size is 0, block_rows is 0, or a product overflows or exceeds kMaxMatrixBytes.
Result<TableGeometry> ComputeGeometry(std::uint64_t rows, std::uint64_t dim,
                                      std::uint64_t element_size, std::uint64_t block_rows,
                                      const std::string& what);

// The version string written into kMetaCreator.
std::string_view EmbstoreVersion();

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_FORMAT_H_
