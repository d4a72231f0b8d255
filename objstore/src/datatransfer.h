// Direct block reads from HDFS DataNodes: the READ_BLOCK operation of Hadoop's data transfer
// protocol (version 28, Hadoop 2.x and 3.x), what Hadoop's own clients use, spoken over a plain
// TCP connection to a DataNode's transfer port (dfs.datanode.address, 9866). WebHdfsClient reads
// this way where it can (webhdfs.h): the DataNode sends the block file's bytes straight to the
// socket, where a WebHDFS read goes through an HDFS client inside the DataNode and an HTTP body,
// several copies more. Which blocks and DataNodes hold a range comes from the NameNode over
// WebHDFS (GET_BLOCK_LOCATIONS), with the block access tokens a secure cluster wants.
//
// The exchange, all integers big-endian unless the protobuf encoding says otherwise:
//   client: u16 version 28, u8 op 81 (READ_BLOCK), varint length + OpReadBlockProto
//           {header {baseHeader {block {poolId, blockId, generationStamp, numBytes}, token},
//           clientName}, offset, len, sendChecksums}
//   node:   varint length + BlockOpResponseProto {status, message, readOpChecksumInfo
//           {checksum {type NULL|CRC32|CRC32C, bytesPerChecksum}, chunkOffset}}
//   node:   packets until one with lastPacketInBlock: u32 payload length (itself + checksums +
//           data), u16 header length, PacketHeaderProto {sfixed64 offsetInBlock, sfixed64 seqno,
//           bool lastPacketInBlock, sfixed32 dataLen}, one u32 checksum per chunk, the data. The
//           data starts at chunkOffset (the requested offset rounded down to a chunk) and ends
//           at a chunk boundary or the block's end.
//   client: varint length + ClientReadStatusProto {status CHECKSUM_OK}
// A DataNode that wants SASL (dfs.data.transfer.protection) or encryption
// (dfs.encrypt.data.transfer) first closes the connection without a byte: that is
// kNeedsSasl below, and the caller reads over WebHDFS instead.
//
// Internal to embstore::objstore.
#ifndef EMBSTORE_OBJSTORE_DATATRANSFER_H_
#define EMBSTORE_OBJSTORE_DATATRANSFER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/common/status.h"

namespace embstore::objstore::internal {

// A Hadoop token (block access token), decoded from its URL-safe string form
// (Token.encodeToUrlString: URL-safe base64 of vint-prefixed identifier and password, then
// kind and service as Text). Empty fields for the empty token "AAAAAA" of an insecure cluster.
struct HadoopToken {
  std::string identifier, password, kind, service;
  bool empty() const { return identifier.empty() && password.empty(); }
};
// InvalidArgument when `url_string` is not such an encoding.
Result<HadoopToken> DecodeHadoopToken(std::string_view url_string);

// One block of a file, and where its replicas are, as GET_BLOCK_LOCATIONS gives it.
struct HdfsBlock {
  std::uint64_t file_offset = 0;  // where the block starts in the file
  std::uint64_t bytes = 0;        // its length
  std::string pool_id;
  std::uint64_t block_id = 0;
  std::uint64_t generation_stamp = 0;
  HadoopToken token;
  std::vector<std::string> datanodes;  // "IP:XFERPORT", in the NameNode's order (nearest first)
};
// The blocks in a GET_BLOCK_LOCATIONS answer (its "LocatedBlocks" object, as JSON text); IOError
// naming `where` when it is malformed.
Result<std::vector<HdfsBlock>> ParseLocatedBlocks(const std::string& where, std::string_view json);

struct BlockReadOptions {
  std::string client_name;  // shows in the DataNode's logs
  std::chrono::milliseconds connect_timeout{3000};
  std::chrono::seconds io_timeout{30};  // no byte for this long: the read fails
};

// What a failed ReadBlock means for the caller.
enum class BlockReadFailure {
  kNone,
  kNeedsSasl,  // the DataNode closed before answering: it wants SASL or encryption
  kReplica,    // this replica failed (down, gone, a bad checksum): try another
  kToken,      // the DataNode refused the block token (expired): ask the NameNode again
};

// Bytes [offset, offset + out.size()) of `block` (offset within the block) from the DataNode at
// `datanode` ("IP:PORT"), every chunk checked against the DataNode's CRC before it is kept.
// Statuses name `what` (the file) and the DataNode; `*failure` says what the failure means.
Status ReadBlock(const std::string& what, const std::string& datanode, const HdfsBlock& block,
                 std::uint64_t offset, std::span<std::byte> out, const BlockReadOptions& options,
                 BlockReadFailure* failure);

}  // namespace embstore::objstore::internal

#endif  // EMBSTORE_OBJSTORE_DATATRANSFER_H_
