// The LookupResponse wire codec against protobuf's own encoder and parser: what the server sends
// (protobuf's encoding of the other fields, then the data header and bytes) any protobuf parser
// reads, and whatever encoding protobuf writes the codec reads, however it is split into pieces.
#include "embstore/proto/lookup_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "embstore/v1/embstore.pb.h"

namespace embstore::wire {
namespace {

v1::LookupResponse Sample() {
  v1::LookupResponse m;
  m.set_content_id(0xfedcba9876543210ull);
  m.set_dim(3);
  m.set_dtype(v1::DTYPE_F16);
  for (std::uint64_t r : {7ull, 300ull, 0ull, 1ull << 40}) m.add_rows(r);
  for (std::uint32_t i : {1u, 5u}) m.add_missing(i);
  for (std::uint64_t s : {0ull, 0xffffffffffffffffull, 12ull, 99ull}) m.add_row_checksums(s);
  return m;
}

std::string Joined(const DecodedLookup& d) {
  std::string out;
  for (const Piece& p : d.data) out.append(reinterpret_cast<const char*>(p.data()), p.size());
  return out;
}

TEST(LookupCodec, FieldsThenDataHeaderThenBytesIsALookupResponse) {
  const std::string data(24, 'r');
  std::string wire = Sample().SerializeAsString();
  AppendLookupDataHeader(data.size(), &wire);
  wire += data;
  v1::LookupResponse m;
  ASSERT_TRUE(m.ParseFromString(wire));
  EXPECT_EQ(m.content_id(), 0xfedcba9876543210ull);
  EXPECT_EQ(m.rows_size(), 4);
  EXPECT_EQ(m.row_checksums(1), 0xffffffffffffffffull);
  EXPECT_EQ(m.data(), data);
}

TEST(LookupCodec, DecodesProtobufsEncodingSplitAnywhere) {
  v1::LookupResponse m = Sample();
  m.set_data(std::string("abcdefghijklmnopqrstuvwx"));
  const std::string wire = m.SerializeAsString();  // data in field order, before the checksums
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(wire.data());
  for (std::size_t cut1 = 0; cut1 <= wire.size(); ++cut1) {
    for (std::size_t cut2 = cut1; cut2 <= wire.size(); cut2 += 3) {
      std::vector<Piece> pieces{Piece(bytes, cut1), Piece(bytes + cut1, cut2 - cut1),
                                Piece(bytes + cut2, wire.size() - cut2)};
      DecodedLookup d;
      std::string error;
      ASSERT_TRUE(DecodeLookupResponse(pieces, &d, &error)) << cut1 << "/" << cut2 << ": " << error;
      EXPECT_EQ(d.content_id, m.content_id());
      EXPECT_EQ(d.dim, 3u);
      EXPECT_EQ(d.dtype, static_cast<std::uint64_t>(v1::DTYPE_F16));
      EXPECT_EQ(d.rows, (std::vector<std::uint64_t>{7, 300, 0, 1ull << 40}));
      EXPECT_EQ(d.missing, (std::vector<std::uint32_t>{1, 5}));
      EXPECT_EQ(d.row_checksums,
                (std::vector<std::uint64_t>{0, 0xffffffffffffffffull, 12, 99}));
      EXPECT_EQ(d.data_size, 24u);
      EXPECT_EQ(Joined(d), m.data());
    }
  }
}

TEST(LookupCodec, ReadsUnpackedRepeatedFieldsAndSkipsUnknownOnes) {
  // Each row id, missing index and checksum as a field of its own (how proto2 writers and some
  // other encoders send repeated scalars), then an unknown field of each wire type.
  const std::uint8_t wire[] = {
      0x20, 0x05,              // rows: 5
      0x20, 0xac, 0x02,        // rows: 300
      0x28, 0x02,              // missing: 2
      0x39, 1, 0, 0, 0, 0, 0, 0, 0,  // row_checksums: 1
      0x39, 2, 0, 0, 0, 0, 0, 0, 0,  // row_checksums: 2
      0x32, 0x02, 'h', 'i',    // data: "hi"
      0x80, 0x01, 0x07,        // field 16, varint
      0x85, 0x01, 1, 2, 3, 4,  // field 16, fixed32
      0x8a, 0x01, 0x01, 'z',   // field 17, bytes
  };
  std::vector<Piece> pieces{Piece(wire, sizeof wire)};
  DecodedLookup d;
  std::string error;
  ASSERT_TRUE(DecodeLookupResponse(pieces, &d, &error)) << error;
  EXPECT_EQ(d.rows, (std::vector<std::uint64_t>{5, 300}));
  EXPECT_EQ(d.missing, (std::vector<std::uint32_t>{2}));
  EXPECT_EQ(d.row_checksums, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(Joined(d), "hi");
}

TEST(LookupCodec, RowsArePlacedInTheirPiecesOrCopiedWhenSplit) {
  // 7 rows of 5 bytes, split every way into up to three pieces (pieces shorter than a row too).
  std::string data;
  for (int i = 0; i < 35; ++i) data.push_back(static_cast<char>('a' + i % 26));
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(data.data());
  for (std::size_t cut1 = 0; cut1 <= data.size(); ++cut1) {
    for (std::size_t cut2 = cut1; cut2 <= data.size(); ++cut2) {
      DecodedLookup d;
      d.data_size = data.size();
      for (auto [from, to] : {std::pair{std::size_t{0}, cut1}, std::pair{cut1, cut2},
                              std::pair{cut2, data.size()}}) {
        if (to > from) d.data.emplace_back(bytes + from, to - from);
      }
      std::vector<const std::uint8_t*> at;
      std::vector<std::uint8_t> spill;
      PlaceRows(d, 5, &at, &spill);
      ASSERT_EQ(at.size(), 7u);
      std::size_t copied = 0;
      for (std::size_t k = 0; k < 7; ++k) {
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(at[k]), 5), data.substr(5 * k, 5))
            << cut1 << "/" << cut2 << " row " << k;
        const bool in_place = at[k] >= bytes && at[k] < bytes + data.size();
        EXPECT_EQ(in_place, at[k] == bytes + 5 * k);
        copied += in_place ? 0 : 1;
        // A row is copied exactly when a cut falls inside it.
        const bool split = (cut1 > 5 * k && cut1 < 5 * k + 5) || (cut2 > 5 * k && cut2 < 5 * k + 5);
        EXPECT_EQ(!in_place, split) << cut1 << "/" << cut2 << " row " << k;
      }
      EXPECT_LE(copied * 5, spill.size());
    }
  }
}

TEST(LookupCodec, MalformedRepliesAreRefusedNamingWhat) {
  auto decode = [](std::vector<std::uint8_t> wire) {
    std::vector<Piece> pieces{Piece(wire.data(), wire.size())};
    DecodedLookup d;
    std::string error;
    EXPECT_FALSE(DecodeLookupResponse(pieces, &d, &error));
    return error;
  };
  EXPECT_EQ(decode({0x32, 0x05, 'a', 'b'}), "malformed LookupResponse: truncated data");
  EXPECT_EQ(decode({0x3a, 0x07, 1, 2, 3, 4, 5, 6, 7}),
            "malformed LookupResponse: packed row checksums are not whole fixed64s");
  // A packed varint whose last byte lies past the field's length.
  EXPECT_EQ(decode({0x22, 0x01, 0x80, 0x01}),
            "malformed LookupResponse: a packed varint runs past its field");
  EXPECT_EQ(decode({0x22, 0x03, 0x01}), "malformed LookupResponse: truncated packed varints");
  EXPECT_EQ(decode({0x28, 0x80, 0x80, 0x80, 0x80, 0x10}),
            "malformed LookupResponse: a missing index is not a uint32");
  EXPECT_EQ(decode({0x0f}), "malformed LookupResponse: unknown wire type");
  EXPECT_EQ(decode({0x09, 1, 2}), "malformed LookupResponse: truncated fixed64");
}

}  // namespace
}  // namespace embstore::wire
