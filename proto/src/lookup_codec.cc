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
  auto fail = [&](const char* what) {
    *error = std::string("malformed LookupResponse: ") + what;
    return false;
  };
  // A repeated varint field's value, from its unpacked or its packed form.
  auto add_varint = [&](std::uint64_t field, std::uint64_t v) -> bool {
    if (field == kRows) out->rows.push_back(v);
    if (field == kMissing) {
      if (v > UINT32_MAX) return fail("a missing index is not a uint32");
      out->missing.push_back(static_cast<std::uint32_t>(v));
    }
    return true;
  };
  while (!cur.AtEnd()) {
    std::uint64_t key, v;
    if (!cur.Varint(&key)) return fail("truncated field key");
    const std::uint64_t field = key >> 3;
    switch (static_cast<std::uint32_t>(key & 7)) {
      case kVarint:
        if (!cur.Varint(&v)) return fail("truncated varint");
        if (field == kDim) out->dim = v;
        if (field == kDType) out->dtype = v;
        if (!add_varint(field, v)) return false;
        break;
      case kFixed64:
        if (!cur.Fixed(8, &v)) return fail("truncated fixed64");
        if (field == kContentId) out->content_id = v;
        if (field == kRowChecksums) out->row_checksums.push_back(v);  // not packed: also valid
        break;
      case kFixed32:
        if (!cur.Fixed(4, &v)) return fail("truncated fixed32");
        break;
      case kBytes: {
        if (!cur.Varint(&v)) return fail("truncated length");
        if (field == kData) {  // a second occurrence replaces the first, as in protobuf
          out->data.clear();
          out->data_size = v;
          if (!cur.Take(v, &out->data)) return fail("truncated data");
        } else if (field == kRowChecksums) {
          if (v % 8 != 0) return fail("packed row checksums are not whole fixed64s");
          out->row_checksums.reserve(out->row_checksums.size() + v / 8);
          for (std::uint64_t i = 0; i < v / 8; ++i) {
            std::uint64_t s;
            if (!cur.Fixed(8, &s)) return fail("truncated row checksums");
            out->row_checksums.push_back(s);
          }
        } else if (field == kRows || field == kMissing) {
          const std::uint64_t end = cur.Position() + v;
          while (cur.Position() < end) {
            std::uint64_t item;
            if (!cur.Varint(&item)) return fail("truncated packed varints");
            if (!add_varint(field, item)) return false;
          }
          if (cur.Position() != end) return fail("a packed varint runs past its field");
        } else if (!cur.Take(v, nullptr)) {  // unknown fields: skipped
          return fail("truncated field");
        }
        break;
      }
      default:
        return fail("unknown wire type");
    }
  }
  return true;
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
