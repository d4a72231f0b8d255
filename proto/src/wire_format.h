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

// Reads a message's fields in order, whatever their order and however they are split into
// pieces: on_varint(field, value) and on_fixed64(field, value) for those wire types (fixed32
// fields are skipped), on_bytes(field, length) for length-delimited ones, which must take or skip
// exactly `length` bytes from `cur`. Each callback returns what was wrong, or nullptr. Returns
// what was wrong with the message, or nullptr when it is well formed.
template <typename OnVarint, typename OnFixed64, typename OnBytes>
const char* ReadFields(Cursor& cur, OnVarint on_varint, OnFixed64 on_fixed64, OnBytes on_bytes) {
  while (!cur.AtEnd()) {
    std::uint64_t key, v;
    if (!cur.Varint(&key)) return "truncated field key";
    const std::uint64_t field = key >> 3;
    const char* wrong = nullptr;
    switch (static_cast<std::uint32_t>(key & 7)) {
      case kVarint:
        if (!cur.Varint(&v)) return "truncated varint";
        wrong = on_varint(field, v);
        break;
      case kFixed64:
        if (!cur.Fixed(8, &v)) return "truncated fixed64";
        wrong = on_fixed64(field, v);
        break;
      case kFixed32:
        if (!cur.Fixed(4, &v)) return "truncated fixed32";
        break;
      case kBytes:
        if (!cur.Varint(&v)) return "truncated length";
        wrong = on_bytes(field, v);
        break;
      default:
        return "unknown wire type";
    }
    if (wrong != nullptr) return wrong;
  }
  return nullptr;
}

// The `length` bytes of a packed repeated fixed64 field, appended to `out`; `not_whole` or
// `truncated` when they are not whole values or not all there.
inline const char* ReadPackedFixed64(Cursor& cur, std::uint64_t length,
                                     std::vector<std::uint64_t>* out, const char* not_whole,
                                     const char* truncated) {
  if (length % 8 != 0) return not_whole;
  out->reserve(out->size() + length / 8);
  for (std::uint64_t i = 0; i < length / 8; ++i) {
    std::uint64_t v;
    if (!cur.Fixed(8, &v)) return truncated;
    out->push_back(v);
  }
  return nullptr;
}

// Skips a length-delimited field nobody reads.
inline const char* SkipBytes(Cursor& cur, std::uint64_t length) {
  return cur.Take(length, nullptr) ? nullptr : "truncated field";
}

}  // namespace embstore::wire

#endif  // EMBSTORE_PROTO_SRC_WIRE_FORMAT_H_
