#include "chunk_reader.h"

#include <cstring>

namespace embstore::client::internal {
namespace {

constexpr int kWireVarint = 0, kWireFixed64 = 1, kWireBytes = 2, kWireFixed32 = 5;

// Reads the protobuf wire format across the slices of a ByteBuffer.
class SliceCursor {
 public:
  explicit SliceCursor(const std::vector<grpc::Slice>& slices) : slices_(slices) {}

  bool AtEnd() {
    Settle();
    return i_ >= slices_.size();
  }
  bool Byte(std::uint8_t* b) {
    Settle();
    if (i_ >= slices_.size()) return false;
    *b = slices_[i_].begin()[off_++];
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
  // Appends views of the next n bytes to `pieces` (no copy).
  bool Take(std::uint64_t n, std::vector<std::span<const std::uint8_t>>* pieces) {
    while (n > 0) {
      Settle();
      if (i_ >= slices_.size()) return false;
      std::size_t avail = slices_[i_].size() - off_;
      std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(avail, n));
      if (pieces) pieces->emplace_back(slices_[i_].begin() + off_, take);
      off_ += take;
      n -= take;
    }
    return true;
  }

 private:
  void Settle() {
    while (i_ < slices_.size() && off_ >= slices_[i_].size()) {
      ++i_;
      off_ = 0;
    }
  }
  const std::vector<grpc::Slice>& slices_;
  std::size_t i_ = 0, off_ = 0;
};

}  // namespace

void RawChunk::CopyPayload(std::byte* dst) const {
  for (const auto& p : payload) {
    std::memcpy(dst, p.data(), p.size());
    dst += p.size();
  }
}

bool DecodeRowChunk(const std::vector<grpc::Slice>& slices, RawChunk* out, std::string* error) {
  *out = RawChunk();
  SliceCursor cur(slices);
  auto fail = [&](const char* what) {
    *error = std::string("malformed RowChunk: ") + what;
    return false;
  };
  while (!cur.AtEnd()) {
    std::uint64_t key, v;
    if (!cur.Varint(&key)) return fail("truncated field key");
    const std::uint64_t field = key >> 3;
    const int wire = static_cast<int>(key & 7);
    switch (wire) {
      case kWireVarint:
        if (!cur.Varint(&v)) return fail("truncated varint");
        if (field == v1::RowChunk::kFirstRowFieldNumber) out->first_row = v;
        if (field == v1::RowChunk::kRowCountFieldNumber) out->row_count = v;
        if (field == v1::RowChunk::kFirstBlockFieldNumber) out->first_block = v;
        break;
      case kWireFixed64:
        if (!cur.Fixed(8, &v)) return fail("truncated fixed64");
        if (field == v1::RowChunk::kPayloadChecksumFieldNumber) out->payload_checksum = v;
        if (field == v1::RowChunk::kContentIdFieldNumber) out->content_id = v;
        // A non-packed repeated fixed64 is also valid protobuf.
        if (field == v1::RowChunk::kBlockChecksumsFieldNumber) out->block_checksums.push_back(v);
        break;
      case kWireFixed32:
        if (!cur.Fixed(4, &v)) return fail("truncated fixed32");
        break;
      case kWireBytes: {
        if (!cur.Varint(&v)) return fail("truncated length");
        if (field == v1::RowChunk::kPayloadFieldNumber) {
          out->payload.clear();
          out->payload_size = v;
          if (!cur.Take(v, &out->payload)) return fail("truncated payload");
        } else if (field == v1::RowChunk::kBlockChecksumsFieldNumber) {
          if (v % 8 != 0) return fail("packed checksums are not whole fixed64s");
          for (std::uint64_t i = 0; i < v / 8; ++i) {
            std::uint64_t s;
            if (!cur.Fixed(8, &s)) return fail("truncated checksums");
            out->block_checksums.push_back(s);
          }
        } else if (!cur.Take(v, nullptr)) {  // table info and unknown fields: skipped
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

RowStreamCall::RowStreamCall(grpc::GenericStub* stub, grpc::ClientContext* ctx,
                             const v1::StreamRowsRequest& request) {
  call_ = stub->PrepareCall(ctx, "/embstore.v1.EmbStore/StreamRows", &cq_);
  call_->StartCall(this);
  started_ = Wait();
  if (!started_) return;
  std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer buf(&slice, 1);
  call_->WriteLast(buf, grpc::WriteOptions(), this);
  started_ = Wait();
}

RowStreamCall::~RowStreamCall() {
  Finish();
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) {
  }
}

bool RowStreamCall::Wait() {
  void* tag;
  bool ok = false;
  if (!cq_.Next(&tag, &ok)) return false;
  return ok;
}

bool RowStreamCall::Read(RawChunk* chunk, std::string* decode_error) {
  if (!started_ || finished_) return false;
  grpc::ByteBuffer bb;
  call_->Read(&bb, this);
  if (!Wait()) return false;
  slices_.clear();
  if (!bb.Dump(&slices_).ok()) {
    *decode_error = "cannot read the received message";
    return false;
  }
  return DecodeRowChunk(slices_, chunk, decode_error);
}

grpc::Status RowStreamCall::Finish() {
  if (!finished_) {
    finished_ = true;
    call_->Finish(&status_, this);
    Wait();
  }
  return status_;
}

}  // namespace embstore::client::internal
