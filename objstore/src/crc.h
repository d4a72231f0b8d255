// The CRCs HDFS keeps per chunk of a block (512 bytes by default), checked on direct block reads
// (datatransfer.h): CRC-32C (Castagnoli, HDFS's default since Hadoop 2) and CRC-32 (zlib's).
// Internal to embstore::objstore.
#ifndef EMBSTORE_OBJSTORE_CRC_H_
#define EMBSTORE_OBJSTORE_CRC_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace embstore::objstore::internal {

// CRC-32C of `data`: reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF
// ("123456789" gives 0xE3069283). Uses the CPU's CRC32 instructions (x86-64 SSE4.2, ARMv8 CRC)
// where the CPU has them, found by CPUID / the auxiliary vector once; a table otherwise.
std::uint32_t Crc32c(std::span<const std::byte> data);
// The CRC-32C of each `chunk`-byte piece of `data` (the last may be shorter) into out[i], for
// HDFS's per-chunk checksums: out.size() must be the number of pieces. With the CPU's
// instructions, four pieces are hashed side by side (the instruction's latency is three times
// its throughput, so one chain alone leaves it mostly idle).
void Crc32cChunks(std::span<const std::byte> data, std::size_t chunk, std::span<std::uint32_t> out);
// The table version, the reference the instruction version is tested against.
std::uint32_t Crc32cPortable(std::span<const std::byte> data);
// Whether Crc32c uses the CPU's instructions.
bool Crc32cUsesHardware();

// CRC-32 as zlib computes it ("123456789" gives 0xCBF43926).
std::uint32_t Crc32(std::span<const std::byte> data);

}  // namespace embstore::objstore::internal

#endif  // EMBSTORE_OBJSTORE_CRC_H_
