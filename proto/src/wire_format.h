// Private to embstore::wire: the pieces of the protobuf wire format (protobuf encoding spec,
// "Message Structure") that the hand-written codecs share: writing tags and varints, and a
// cursor that reads a message held in pieces (gRPC's receive slices) without joining them.
#ifndef EMBSTORE_PROTO_SRC_WIRE_FORMAT_H_
#define EMBSTORE_PROTO_SRC_WIRE_FORMAT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "embstore/proto/wire_piece.h"

namespace embstore::wire {

// Protobuf wire types (protobuf encoding spec, "Message Structure").
inline constexpr std::uint32_t kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

inline void PutVarint(std::uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

inline void PutTag(std::uint32_t field, std::uint32_t wire_type, std::string* out) {
  PutVarint((static_cast<std::uint64_t>(field) << 3) | wire_type, out);
}

inline void PutFixed64(std::uint64_t v, std::string* out) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// proto3 leaves scalar fields at their default value off the wire.
inline void PutVarintField(std::uint32_t field, std::uint64_t v, std::string* out) {
  if (v == 0) return;
  PutTag(field, kVarint, out);
  PutVarint(v, out);
}

// Reads the protobuf wire format across the pieces of a message.
class Cursor {
 public:
  explicit Cursor(std::span<const Piece> pieces) : pieces_(pieces) {}

  bool AtEnd() {
    Settle();
    return i_ >= pieces_.size();
  }
  bool Byte(std::uint8_t* b) {
    Settle();
    if (i_ >= pieces_.size()) return false;
    *b = pieces_[i_][off_++];
    ++position_;
    return true;
  }
  bool Varint(std::uint64_t* v) {
    *v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      std::uint8_t b;
      if (!Byte(&b)) return false;
      *v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;  // more than 10 bytes: malformed
  }
  bool Fixed(int bytes, std::uint64_t* v) {
    *v = 0;
    for (int i = 0; i < bytes; ++i) {
      std::uint8_t b;
      if (!Byte(&b)) return false;
      *v |= static_cast<std::uint64_t>(b) << (8 * i);
    }
    return true;
  }
  // Bytes read so far.
  std::uint64_t Position() const { return position_; }
  // Appends views of the next n bytes to `out` (no copy); skips them when out is null.
  bool Take(std::uint64_t n, std::vector<Piece>* out) {
    while (n > 0) {
      Settle();
      if (i_ >= pieces_.size()) return false;
      const std::size_t take =
          static_cast<std::size_t>(std::min<std::uint64_t>(pieces_[i_].size() - off_, n));
      if (out) out->push_back(pieces_[i_].subspan(off_, take));
      off_ += take;
      position_ += take;
      n -= take;
    }
    return true;
  }

 private:
  void Settle() {
    while (i_ < pieces_.size() && off_ >= pieces_[i_].size()) {
      ++i_;
      off_ = 0;
    }
  }
  std::span<const Piece> pieces_;
  std::size_t i_ = 0, off_ = 0;
  std::uint64_t position_ = 0;
};

}  // namespace embstore::wire

#endif  // EMBSTORE_PROTO_SRC_WIRE_FORMAT_H_
