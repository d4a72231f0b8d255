#include "embstore/proto/lookup_codec.h"

#include <cstring>

#include "wire_format.h"

namespace embstore::wire {
namespace {

// Field numbers of message LookupResponse (proto/embstore/v1/embstore.proto).
constexpr std::uint32_t kContentId = 1, kDim = 2, kDType = 3, kRows = 4, kMissing = 5, kData = 6,
                        kRowChecksums = 7;

}  // namespace

void AppendLookupDataHeader(std::uint64_t size, std::string* out) {
  PutTag(kData, kBytes, out);
  PutVarint(size, out);
}

bool DecodeLookupResponse(std::span<const Piece> pieces, DecodedLookup* out, std::string* error) {
  *out = DecodedLookup();
  Cursor cur(pieces);
  // A repeated varint field's value, from its unpacked or its packed form.
  auto add_varint = [&](std::uint64_t field, std::uint64_t v) -> const char* {
    if (field == kRows) out->rows.push_back(v);
    if (field == kMissing) {
      if (v > UINT32_MAX) return "a missing index is not a uint32";
      out->missing.push_back(static_cast<std::uint32_t>(v));
    }
    return nullptr;
  };
  const char* wrong = ReadFields(
      cur,
      [&](std::uint64_t field, std::uint64_t v) -> const char* {
        if (field == kDim) out->dim = v;
        if (field == kDType) out->dtype = v;
        return add_varint(field, v);
      },
      [&](std::uint64_t field, std::uint64_t v) -> const char* {
        if (field == kContentId) out->content_id = v;
        if (field == kRowChecksums) out->row_checksums.push_back(v);  // not packed: also valid
        return nullptr;
      },
      [&](std::uint64_t field, std::uint64_t v) -> const char* {
        if (field == kData) {  // a second occurrence replaces the first, as in protobuf
          out->data.clear();
          out->data_size = v;
          return cur.Take(v, &out->data) ? nullptr : "truncated data";
        }
        if (field == kRowChecksums) {
          return ReadPackedFixed64(cur, v, &out->row_checksums,
                                   "packed row checksums are not whole fixed64s",
                                   "truncated row checksums");
        }
        if (field == kRows || field == kMissing) {
          const std::uint64_t end = cur.Position() + v;
          while (cur.Position() < end) {
            std::uint64_t item;
            if (!cur.Varint(&item)) return "truncated packed varints";
            if (const char* bad = add_varint(field, item)) return bad;
          }
          return cur.Position() == end ? nullptr : "a packed varint runs past its field";
        }
        return SkipBytes(cur, v);  // unknown fields: skipped
      });
  if (wrong == nullptr) return true;
  *error = std::string("malformed LookupResponse: ") + wrong;
  return false;
}

void PlaceRows(const DecodedLookup& d, std::size_t row_bytes, std::vector<const std::uint8_t*>* at,
               std::vector<std::uint8_t>* spill) {
  const std::size_t rows = static_cast<std::size_t>(d.data_size / row_bytes);
  at->resize(rows);
  spill->resize(d.data.size() > 1 ? (d.data.size() - 1) * row_bytes : 0);
  std::size_t piece = 0, off = 0, spilled = 0;
  auto settle = [&] {
    while (piece < d.data.size() && off == d.data[piece].size()) {
      ++piece;
      off = 0;
    }
  };
  for (std::size_t k = 0; k < rows; ++k) {
    settle();
    if (d.data[piece].size() - off >= row_bytes) {
      (*at)[k] = d.data[piece].data() + off;
      off += row_bytes;
      continue;
    }
    std::uint8_t* dst = spill->data() + spilled++ * row_bytes;
    for (std::size_t got = 0; got < row_bytes;) {
      settle();
      const std::size_t n = std::min(row_bytes - got, d.data[piece].size() - off);
      std::memcpy(dst + got, d.data[piece].data() + off, n);
      got += n;
      off += n;
    }
    (*at)[k] = dst;
  }
}

}  // namespace embstore::wire
