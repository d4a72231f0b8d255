// Constants of the table file format. docs/FORMAT.md is the normative spec; every constant here
// names the section of that document it comes from.
#ifndef EMBSTORE_STORE_FORMAT_H_
#define EMBSTORE_STORE_FORMAT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace embstore::store {

// "Layout": the matrix data starts at a multiple of this file offset.
inline constexpr std::uint64_t kDataAlignment = 4096;

// "Layout": the JSON header length field is 8 bytes; headers larger than this are rejected
// (safetensors itself caps headers at 100 MB).
inline constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

// "Profile": the version this code writes and the newest it reads.
inline constexpr int kFormatVersion = 1;

// "Tensors": names of the tensors in the data buffer, in the order they lie there.
inline constexpr std::string_view kTensorEmbedding = "embedding";
inline constexpr std::string_view kTensorChecksums = "checksums";
inline constexpr std::string_view kTensorKeyOffsets = "keys.offsets";
inline constexpr std::string_view kTensorKeyIndex = "keys.index";
inline constexpr std::string_view kTensorKeyBytes = "keys.bytes";

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
// Every metadata key outside the "embstore." prefix belongs to the user.
inline constexpr std::string_view kReservedMetaPrefix = "embstore.";

// "Keys": an empty slot of keys.index.
inline constexpr std::uint64_t kEmptySlot = ~std::uint64_t{0};

// "Keys": the longest key, in bytes.
inline constexpr std::uint64_t kMaxKeyBytes = 65535;

// The version string written into kMetaCreator.
std::string_view EmbstoreVersion();

}  // namespace embstore::store

#endif  // EMBSTORE_STORE_FORMAT_H_
