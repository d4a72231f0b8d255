// Hadoop's data transfer protocol, the READ_BLOCK operation (datatransfer.h). The few protobuf
// messages are encoded and decoded by hand: they are small and fixed, and objstore links no
// protobuf runtime.
#include "datatransfer.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "crc.h"

namespace embstore::objstore::internal {
namespace {

constexpr std::uint16_t kDataTransferVersion = 28;
constexpr std::uint8_t kOpReadBlock = 81;

// DataTransferProtos.Status
constexpr std::uint64_t kSuccess = 0;
constexpr std::uint64_t kErrorAccessToken = 5;
constexpr std::uint64_t kChecksumOk = 6;

// ChecksumTypeProto
constexpr std::uint64_t kChecksumNull = 0;
constexpr std::uint64_t kChecksumCrc32 = 1;
constexpr std::uint64_t kChecksumCrc32c = 2;

// Packets carry at most 16 MiB (dfs.data.transfer.max.packet.size), DataNodes send 64 KiB.
constexpr std::uint32_t kMaxPacketBytes = 16u << 20;

// --- Protobuf wire format ---------------------------------------------------------------------

void PutVarint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
// Field `field` as a varint (wire type 0) and as length-delimited bytes (wire type 2).
void PutUint(std::string& out, int field, std::uint64_t v) {
  PutVarint(out, static_cast<std::uint64_t>(field) << 3);
  PutVarint(out, v);
}
void PutBytes(std::string& out, int field, std::string_view bytes) {
  PutVarint(out, (static_cast<std::uint64_t>(field) << 3) | 2);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

// Reads fields of one message: Next() gives each field's number and wire type, then its value
// through Varint(), Bytes(), Fixed64() or Fixed32(). A malformed message leaves ok() false.
class ProtoReader {
 public:
  explicit ProtoReader(std::string_view s) : s_(s) {}
  bool ok() const { return ok_; }
  bool Next(int* field, int* wire) {
    if (!ok_ || pos_ >= s_.size()) return false;
    const std::uint64_t key = Varint();
    *field = static_cast<int>(key >> 3);
    *wire = static_cast<int>(key & 7);
    return ok_;
  }
  std::uint64_t Varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= s_.size()) break;
      const auto b = static_cast<std::uint8_t>(s_[pos_++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ok_ = false;
    return 0;
  }
  std::string_view Bytes() {
    const std::uint64_t n = Varint();
    if (!ok_ || n > s_.size() - pos_) {
      ok_ = false;
      return {};
    }
    std::string_view v = s_.substr(pos_, n);
    pos_ += n;
    return v;
  }
  std::uint64_t Fixed(int bytes) {  // little-endian, as protobuf's fixed types are
    if (s_.size() - pos_ < static_cast<std::size_t>(bytes)) {
      ok_ = false;
      return 0;
    }
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(s_[pos_ + i]);
    pos_ += bytes;
    return v;
  }
  void Skip(int wire) {
    switch (wire) {
      case 0:
        Varint();
        break;
      case 1:
        Fixed(8);
        break;
      case 2:
        Bytes();
        break;
      case 5:
        Fixed(4);
        break;
      default:
        ok_ = false;
    }
  }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

// --- Sockets ----------------------------------------------------------------------------------

class Socket {
 public:
  Socket() = default;
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Connects to HOST:PORT ([V6]:PORT) within `timeout`; Unavailable naming `where` otherwise.
  Status Connect(const std::string& where, const std::string& address,
                 std::chrono::milliseconds timeout, std::chrono::seconds io_timeout) {
    const std::size_t colon = address.rfind(':');
    if (colon == std::string::npos) return Status::InvalidArgument(where + ": no port");
    std::string host = address.substr(0, colon);
    const std::string port = address.substr(colon + 1);
    if (host.size() > 1 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      return Status::Unavailable(where + ": cannot resolve " + address + ": " + gai_strerror(rc));
    }
    Status last = Status::Unavailable(where + ": no address for " + address);
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      last = ConnectOne(where, address, a, timeout);
      if (last.ok()) break;
    }
    ::freeaddrinfo(found);
    if (!last.ok()) return last;
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{static_cast<time_t>(io_timeout.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    return Status::OK();
  }

  Status SendAll(const std::string& where, std::string_view bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::FromErrno(where + ": send", errno);
      sent += static_cast<std::size_t>(n);
    }
    return Status::OK();
  }

  // Exactly out.size() bytes. *eof_at_start: the peer closed (or reset) before sending any.
  Status RecvAll(const std::string& where, std::span<std::byte> out, bool* eof_at_start = nullptr) {
    std::size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::recv(fd_, out.data() + got, out.size() - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int err = n == 0 ? 0 : errno;
        if (eof_at_start != nullptr && got == 0 && (n == 0 || err == ECONNRESET)) {
          *eof_at_start = true;
        }
        if (err == EAGAIN || err == EWOULDBLOCK) {
          return Status::Unavailable(where + ": no data for the read timeout");
        }
        return n == 0 ? Status::Unavailable(where + ": the DataNode closed the connection")
                      : Status::FromErrno(where + ": receive", err);
      }
      got += static_cast<std::size_t>(n);
    }
    return Status::OK();
  }

 private:
  Status ConnectOne(const std::string& where, const std::string& address, const addrinfo* a,
                    std::chrono::milliseconds timeout) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) return Status::FromErrno(where + ": socket", errno);
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (rc == 0) {
        ::close(fd);
        return Status::Unavailable(where + ": connecting to DataNode " + address + " timed out");
      }
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (rc < 0 || err != 0) {
        ::close(fd);
        return Status::Unavailable(where + ": cannot connect to DataNode " + address + ": " +
                                   std::strerror(rc < 0 ? errno : err));
      }
    } else if (rc != 0) {
      const int err = errno;
      ::close(fd);
      return Status::Unavailable(where + ": cannot connect to DataNode " + address + ": " +
                                 std::strerror(err));
    }
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    fd_ = fd;
    return Status::OK();
  }

  int fd_ = -1;
};

// A varint-prefixed message from the socket.
Status RecvDelimited(Socket& s, const std::string& where, std::string* msg, bool* eof_at_start) {
  std::uint64_t len = 0;
  for (int shift = 0;; shift += 7) {
    std::byte b;
    EMBSTORE_RETURN_NOT_OK(s.RecvAll(where, {&b, 1}, shift == 0 ? eof_at_start : nullptr));
    len |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(b) & 0x7F) << shift;
    if ((static_cast<std::uint8_t>(b) & 0x80) == 0) break;
    if (shift > 28) return Status::IOError(where + ": a malformed message length");
  }
  if (len > (1u << 20))
    return Status::IOError(where + ": a " + std::to_string(len) +
                           "-byte reply, more than a reply can be");
  msg->resize(len);
  return s.RecvAll(where, std::as_writable_bytes(std::span<char>(msg->data(), msg->size())));
}

// --- Tokens -----------------------------------------------------------------------------------

// Hadoop's WritableUtils vint/vlong: one byte for -112..127; else a byte giving the sign and the
// count (1..8) of big-endian magnitude bytes that follow (negative values are stored
// complemented).
bool ReadVLong(std::string_view& s, std::int64_t* v) {
  if (s.empty()) return false;
  const auto first = static_cast<std::int8_t>(s[0]);
  s.remove_prefix(1);
  if (first >= -112) {
    *v = first;
    return true;
  }
  const bool negative = first < -120;
  const int n = negative ? -(first + 120) : -(first + 112);
  if (n < 1 || n > 8 || s.size() < static_cast<std::size_t>(n)) return false;
  std::uint64_t x = 0;
  for (int i = 0; i < n; ++i) x = (x << 8) | static_cast<std::uint8_t>(s[i]);
  s.remove_prefix(n);
  *v = negative ? static_cast<std::int64_t>(~x) : static_cast<std::int64_t>(x);
  return true;
}

bool ReadWritableBytes(std::string_view& s, std::string* out) {
  std::int64_t n = 0;
  if (!ReadVLong(s, &n) || n < 0 || static_cast<std::uint64_t>(n) > s.size()) return false;
  out->assign(s.substr(0, static_cast<std::size_t>(n)));
  s.remove_prefix(static_cast<std::size_t>(n));
  return true;
}

// URL-safe base64 ('-' and '_'), padded or not; standard '+' and '/' are taken too.
bool DecodeBase64Url(std::string_view in, std::string* out) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-' || c == '+') return 62;
    if (c == '_' || c == '/') return 63;
    return -1;
  };
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  out->clear();
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

}  // namespace

Result<HadoopToken> DecodeHadoopToken(std::string_view url_string) {
  std::string raw;
  HadoopToken t;
  if (DecodeBase64Url(url_string, &raw)) {
    std::string_view s = raw;
    if (ReadWritableBytes(s, &t.identifier) && ReadWritableBytes(s, &t.password) &&
        ReadWritableBytes(s, &t.kind) && ReadWritableBytes(s, &t.service)) {
      return t;
    }
  }
  return Status::InvalidArgument("'" + std::string(url_string.substr(0, 40)) +
                                 "...' is not a Hadoop token in its URL-safe string form");
}

Result<std::vector<HdfsBlock>> ParseLocatedBlocks(const std::string& where, std::string_view json) {
  using Json = nlohmann::json;
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  std::vector<HdfsBlock> blocks;
  try {
    if (j.is_discarded()) throw std::runtime_error("not JSON");
    for (const Json& lb : j.at("LocatedBlocks").at("locatedBlocks")) {
      HdfsBlock b;
      b.file_offset = lb.at("startOffset").get<std::uint64_t>();
      const Json& block = lb.at("block");
      b.pool_id = block.at("blockPoolId").get<std::string>();
      b.block_id = block.at("blockId").get<std::uint64_t>();
      b.generation_stamp = block.at("generationStamp").get<std::uint64_t>();
      b.bytes = block.at("numBytes").get<std::uint64_t>();
      if (auto t = lb.find("blockToken"); t != lb.end() && t->is_object()) {
        EMBSTORE_ASSIGN_OR_RETURN(b.token,
                                  DecodeHadoopToken(t->at("urlString").get<std::string>()));
      }
      for (const Json& dn : lb.at("locations")) {
        std::string ip = dn.at("ipAddr").get<std::string>();
        if (ip.find(':') != std::string::npos) ip = "[" + ip + "]";
        b.datanodes.push_back(ip + ":" + std::to_string(dn.at("xferPort").get<int>()));
      }
      blocks.push_back(std::move(b));
    }
  } catch (const std::exception& e) {
    return Status::IOError(where + ": the NameNode's block locations are malformed (" + e.what() +
                           ")");
  }
  return blocks;
}

Status ReadBlock(const std::string& what, const std::string& datanode, const HdfsBlock& block,
                 std::uint64_t offset, std::span<std::byte> out, const BlockReadOptions& o,
                 BlockReadFailure* failure) {
  *failure = BlockReadFailure::kReplica;
  const std::uint64_t end = offset + out.size();
  const std::string where = what + ": block " + std::to_string(block.block_id) + " bytes " +
                            std::to_string(offset) + ".." + std::to_string(end) +
                            " from DataNode " + datanode;
  if (end > block.bytes) {
    *failure = BlockReadFailure::kNone;
    return Status::InvalidArgument(where + ": past the block's " + std::to_string(block.bytes) +
                                   " bytes");
  }
  if (out.empty()) {
    *failure = BlockReadFailure::kNone;
    return Status::OK();
  }
  Socket sock;
  EMBSTORE_RETURN_NOT_OK(sock.Connect(where, datanode, o.connect_timeout, o.io_timeout));

  // The request.
  std::string ext, base, header, op;
  PutBytes(ext, 1, block.pool_id);
  PutUint(ext, 2, block.block_id);
  PutUint(ext, 3, block.generation_stamp);
  PutUint(ext, 4, block.bytes);
  PutBytes(base, 1, ext);
  if (!block.token.empty()) {
    std::string token;
    PutBytes(token, 1, block.token.identifier);
    PutBytes(token, 2, block.token.password);
    PutBytes(token, 3, block.token.kind);
    PutBytes(token, 4, block.token.service);
    PutBytes(base, 2, token);
  }
  PutBytes(header, 1, base);
  PutBytes(header, 2, o.client_name);
  PutBytes(op, 1, header);
  PutUint(op, 2, offset);
  PutUint(op, 3, out.size());
  PutUint(op, 4, 1);  // sendChecksums
  std::string request;
  request.push_back(static_cast<char>(kDataTransferVersion >> 8));
  request.push_back(static_cast<char>(kDataTransferVersion & 0xFF));
  request.push_back(static_cast<char>(kOpReadBlock));
  PutVarint(request, op.size());
  request += op;
  EMBSTORE_RETURN_NOT_OK(sock.SendAll(where, request));

  // The answer.
  std::string reply;
  bool eof_at_start = false;
  Status st = RecvDelimited(sock, where, &reply, &eof_at_start);
  if (!st.ok()) {
    if (eof_at_start) {
      *failure = BlockReadFailure::kNeedsSasl;
      return Status::Unavailable(where +
                                 ": the DataNode closed the connection without an answer "
                                 "(it wants SASL or encrypted data transfer)");
    }
    return st;
  }
  std::uint64_t status = 1, type = kChecksumNull, per_chunk = 512, chunk_offset = offset;
  std::string message;
  {
    ProtoReader r(reply);
    int field, wire;
    while (r.Next(&field, &wire)) {
      if (field == 1 && wire == 0) {
        status = r.Varint();
      } else if (field == 5 && wire == 2) {
        message = std::string(r.Bytes());
      } else if (field == 4 && wire == 2) {
        ProtoReader info(r.Bytes());
        while (info.Next(&field, &wire)) {
          if (field == 1 && wire == 2) {
            ProtoReader checksum(info.Bytes());
            while (checksum.Next(&field, &wire)) {
              if (field == 1 && wire == 0) {
                type = checksum.Varint();
              } else if (field == 2 && wire == 0) {
                per_chunk = checksum.Varint();
              } else {
                checksum.Skip(wire);
              }
            }
          } else if (field == 2 && wire == 0) {
            chunk_offset = info.Varint();
          } else {
            info.Skip(wire);
          }
        }
      } else {
        r.Skip(wire);
      }
    }
    if (!r.ok()) return Status::IOError(where + ": a malformed answer");
  }
  if (status == kErrorAccessToken) {
    *failure = BlockReadFailure::kToken;
    return Status::PermissionDenied(where + ": the DataNode refused the block access token" +
                                    (message.empty() ? "" : " (" + message + ")"));
  }
  if (status != kSuccess) {
    return Status::Unavailable(where + ": the DataNode answered status " + std::to_string(status) +
                               (message.empty() ? "" : ": " + message));
  }
  const std::size_t csum_bytes = type == kChecksumNull ? 0 : 4;
  if ((type != kChecksumNull && type != kChecksumCrc32 && type != kChecksumCrc32c) ||
      per_chunk == 0 || per_chunk > (1u << 24) || chunk_offset > offset ||
      offset - chunk_offset >= per_chunk) {
    return Status::IOError(where + ": an answer this reader does not understand (checksum type " +
                           std::to_string(type) + ", " + std::to_string(per_chunk) +
                           " bytes per checksum, data from " + std::to_string(chunk_offset) + ")");
  }

  // The packets: their data lands in `out` directly where it lies wholly inside the range asked
  // for, and goes through `scratch` at the two ends, where the DataNode sends whole chunks.
  std::vector<std::byte> scratch, checksums;
  std::vector<std::uint32_t> crcs;
  std::uint64_t at = chunk_offset;  // the block offset of the next data byte
  for (;;) {
    std::byte lengths[6];
    EMBSTORE_RETURN_NOT_OK(sock.RecvAll(where, lengths));
    auto u8 = [&](int i) {
      return static_cast<std::uint32_t>(static_cast<std::uint8_t>(lengths[i]));
    };
    const std::uint32_t payload = (u8(0) << 24) | (u8(1) << 16) | (u8(2) << 8) | u8(3);
    const std::uint32_t header_len = (u8(4) << 8) | u8(5);
    if (payload < 4 || payload > kMaxPacketBytes || header_len > 1024) {
      return Status::IOError(where + ": a malformed packet (payload " + std::to_string(payload) +
                             " bytes, header " + std::to_string(header_len) + ")");
    }
    std::string head(header_len, '\0');
    EMBSTORE_RETURN_NOT_OK(
        sock.RecvAll(where, std::as_writable_bytes(std::span<char>(head.data(), head.size()))));
    std::int64_t in_block = -1;
    std::int64_t data_len = -1;
    bool last = false;
    ProtoReader r(head);
    int field, wire;
    while (r.Next(&field, &wire)) {
      if (field == 1 && wire == 1) {
        in_block = static_cast<std::int64_t>(r.Fixed(8));
      } else if (field == 3 && wire == 0) {
        last = r.Varint() != 0;
      } else if (field == 4 && wire == 5) {
        data_len = static_cast<std::int32_t>(r.Fixed(4));
      } else {
        r.Skip(wire);
      }
    }
    const std::uint64_t chunks =
        data_len > 0 ? (static_cast<std::uint64_t>(data_len) + per_chunk - 1) / per_chunk : 0;
    if (!r.ok() || data_len < 0 || in_block != static_cast<std::int64_t>(at) ||
        payload != 4 + chunks * csum_bytes + static_cast<std::uint64_t>(data_len)) {
      return Status::IOError(where + ": a malformed packet at block offset " + std::to_string(at));
    }
    if (last || data_len == 0) {
      if (at < end) {
        return Status::Unavailable(where + ": the DataNode ended the block at " +
                                   std::to_string(at));
      }
      break;
    }
    checksums.resize(chunks * csum_bytes);
    EMBSTORE_RETURN_NOT_OK(sock.RecvAll(where, checksums));
    const std::uint64_t n = static_cast<std::uint64_t>(data_len);
    std::span<std::byte> data;
    const bool inside = at >= offset && at + n <= end;
    if (inside) {
      data = out.subspan(at - offset, n);
    } else {
      scratch.resize(n);
      data = scratch;
    }
    EMBSTORE_RETURN_NOT_OK(sock.RecvAll(where, data));
    if (csum_bytes != 0) {
      crcs.resize(chunks);
      if (type == kChecksumCrc32c) {
        Crc32cChunks(data, per_chunk, crcs);
      } else {
        for (std::uint64_t c = 0; c < chunks; ++c) {
          const std::uint64_t b = c * per_chunk;
          crcs[c] = Crc32(std::span<const std::byte>(data).subspan(b, std::min(per_chunk, n - b)));
        }
      }
      for (std::uint64_t c = 0; c < chunks; ++c) {
        const std::byte* w = checksums.data() + 4 * c;
        const std::uint32_t want =
            (static_cast<std::uint32_t>(w[0]) << 24) | (static_cast<std::uint32_t>(w[1]) << 16) |
            (static_cast<std::uint32_t>(w[2]) << 8) | static_cast<std::uint32_t>(w[3]);
        if (crcs[c] != want) {
          return Status::Corruption(where +
                                    ": HDFS checksum mismatch in the chunk at block offset " +
                                    std::to_string(at + c * per_chunk) + " (a bad replica)");
        }
      }
    }
    if (!inside) {
      const std::uint64_t b = std::max(at, offset), e = std::min(at + n, end);
      if (b < e) std::memcpy(out.data() + (b - offset), scratch.data() + (b - at), e - b);
    }
    at += n;
  }
  // The status the DataNode waits for before it closes its side.
  std::string ack, status_msg;
  PutUint(status_msg, 1, csum_bytes != 0 ? kChecksumOk : kSuccess);
  PutVarint(ack, status_msg.size());
  ack += status_msg;
  (void)sock.SendAll(where, ack);  // the bytes are in and checked: a failure here costs nothing
  *failure = BlockReadFailure::kNone;
  return Status::OK();
}

}  // namespace embstore::objstore::internal
