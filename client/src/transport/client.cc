#include "embstore/client/client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "embstore/proto/dtype.h"
#include "embstore/proto/lookup_codec.h"
#include "embstore/proto/table_info.h"
#include "embstore/store/checksum.h"
#include "embstore/store/format.h"
#include "embstore/v1/embstore.grpc.pb.h"
#include "file_reader.h"
#include "grpc_util.h"

namespace embstore::client {

namespace v1 = ::embstore::v1;
using Clock = std::chrono::steady_clock;

namespace {

using proto::FromProto;

// Runs job(0) .. job(n - 1) on up to four threads, the caller's among them, and returns the first
// failure in index order once all have finished. Used for requests that are independent of each
// other, so their round trips overlap.
Status RunUpToFour(std::size_t n, const std::function<Status(std::size_t)>& job) {
  std::vector<Status> failed(n);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < n; i = next++) failed[i] = job(i);
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < std::min<std::size_t>(n, 4); ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
  for (const Status& st : failed) EMBSTORE_RETURN_NOT_OK(st);
  return Status::OK();
}

// A Lookup reply decoded where it arrived (lookup_codec.h): its rows' bytes stay in gRPC's receive
// slices instead of being copied into a parsed message. Kept alive as long as rows handed out
// from it (LookupRowsHeld) are in use.
struct LookupReply {
  std::vector<grpc::Slice> slices;
  wire::DecodedLookup fields;
  std::vector<std::uint8_t> straddling;  // rows that cross from one slice into the next, copied
};

// Sends one Lookup and decodes its reply into `reply`.
Status CallLookup(const std::shared_ptr<grpc::Channel>& channel, const ConnectOptions& options,
                  const v1::LookupRequest& req, LookupReply* reply) {
  grpc::ClientContext ctx;
  internal::PrepareContext(&ctx, options, std::nullopt, true);
  std::string bytes = req.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  auto rpc = stub.PrepareUnaryCall(&ctx, "/embstore.v1.EmbStore/Lookup", request, &cq);
  rpc->StartCall();
  grpc::Status s;
  rpc->Finish(&response, &s, &s);
  void* tag = nullptr;
  bool ok = false;
  const bool got = cq.Next(&tag, &ok);
  cq.Shutdown();
  for (void* t; cq.Next(&t, &ok);) {
  }
  if (!got) return Status::Internal("lookup on server '" + options.target + "' never finished");
  if (!s.ok()) return internal::FromGrpc(s, options.target);
  if (!response.Dump(&reply->slices).ok()) {
    return Status::Internal("cannot read the lookup reply of server '" + options.target + "'");
  }
  std::vector<wire::Piece> pieces;
  pieces.reserve(reply->slices.size());
  for (const auto& sl : reply->slices) pieces.emplace_back(sl.begin(), sl.size());
  std::string error;
  if (!wire::DecodeLookupResponse(pieces, &reply->fields, &error)) {
    return Status::Corruption("server '" + options.target + "' sent a lookup reply in table '" +
                              req.table() + "' that does not decode: " + error);
  }
  return Status::OK();
}

// The reply's rows, each checked against its checksum (docs/PROTOCOL.md, "Lookup"): row k starts
// at (*rows)[k], inside the reply's slices or, for a row split between two of them, in
// reply->straddling. A reply whose rows, checksums and data do not agree is Corruption.
Status CheckedReplyRows(const std::string& target, const std::string& table,
                        std::size_t row_bytes, LookupReply* reply,
                        std::vector<const std::byte*>* rows) {
  const wire::DecodedLookup& f = reply->fields;
  if (row_bytes == 0 || f.data_size != f.rows.size() * row_bytes ||
      f.row_checksums.size() != f.rows.size()) {
    return Status::Corruption("server '" + target + "' answered a lookup in table '" + table +
                              "' with " + std::to_string(f.rows.size()) + " rows, " +
                              std::to_string(f.row_checksums.size()) + " checksums and " +
                              std::to_string(f.data_size) + " bytes of " +
                              std::to_string(row_bytes) + "-byte rows");
  }
  std::vector<const std::uint8_t*> at;
  wire::PlaceRows(f, row_bytes, &at, &reply->straddling);
  rows->resize(at.size());
  for (std::size_t k = 0; k < at.size(); ++k) {
    (*rows)[k] = reinterpret_cast<const std::byte*>(at[k]);
    if (store::Checksum64({(*rows)[k], row_bytes}) != f.row_checksums[k]) {
      return Status::Corruption("table '" + table + "' on server '" + target + "': row " +
                                std::to_string(f.rows[k]) +
                                " of a lookup reply fails its checksum");
    }
  }
  return Status::OK();
}

// Rows `ids` of version `content_id` by Lookup RPCs of at most 1 MiB of rows, up to four at a
// time; each reply checked (its rows, their order and their checksums) before
// `take(first, rows, reply)` gets it: ids[first + k] at rows[k], inside `reply`.
Status LookupRowBatches(
    const std::shared_ptr<grpc::Channel>& channel, const ConnectOptions& options,
    const std::string& table, std::span<const std::uint64_t> ids, std::uint64_t content_id,
    std::size_t row_bytes,
    const std::function<void(std::size_t, const std::vector<const std::byte*>&,
                              std::shared_ptr<LookupReply>)>& take,
    std::uint64_t* wire_bytes) {
  const std::size_t per_batch = std::clamp<std::size_t>((1u << 20) / row_bytes, 1, 16384);
  const std::size_t batches = (ids.size() + per_batch - 1) / per_batch;
  std::atomic<std::uint64_t> got{0};
  auto fetch = [&](std::size_t batch) -> Status {
    const std::size_t first = batch * per_batch;
    const std::size_t n = std::min(per_batch, ids.size() - first);
    v1::LookupRequest req;
    req.set_table(table);
    req.set_expected_content_id(content_id);
    auto* rows = req.mutable_rows();
    rows->mutable_ids()->Reserve(static_cast<int>(n));
    for (std::size_t j = first; j < first + n; ++j) rows->add_ids(ids[j]);
    auto reply = std::make_shared<LookupReply>();
    EMBSTORE_RETURN_NOT_OK(CallLookup(channel, options, req, reply.get()));
    const wire::DecodedLookup& f = reply->fields;
    if (!f.missing.empty()) {
      const std::size_t at = f.missing[0] < n ? first + f.missing[0] : first;
      return Status::OutOfRange("row " + std::to_string(ids[at]) + " of table '" + table +
                                "' on server '" + options.target + "' does not exist");
    }
    const bool dtype_known = f.dtype <= 3 && v1::DType_IsValid(static_cast<int>(f.dtype));
    const std::size_t size =
        dtype_known ? store::DTypeSize(FromProto(static_cast<v1::DType>(f.dtype))
                                           .value_or(store::DType::kF32))
                    : 0;
    if (f.content_id != content_id || f.dim * size != row_bytes || f.rows.size() != n) {
      return Status::Corruption("server '" + options.target + "' answered a lookup of " +
                                std::to_string(n) + " rows of table '" + table + "' with " +
                                std::to_string(f.rows.size()) + " rows of " +
                                std::to_string(f.dim * size) + " bytes of version " +
                                std::to_string(f.content_id));
    }
    std::vector<const std::byte*> at;
    EMBSTORE_RETURN_NOT_OK(CheckedReplyRows(options.target, table, row_bytes, reply.get(), &at));
    // Each row arrives with its checksum (docs/PROTOCOL.md, "Lookup"), in the order asked for.
    for (std::size_t k = 0; k < n; ++k) {
      if (f.rows[k] != ids[first + k]) {
        return Status::Corruption("server '" + options.target + "' answered a lookup in table '" +
                                  table + "' with row " + std::to_string(f.rows[k]) +
                                  " where row " + std::to_string(ids[first + k]) +
                                  " was asked for");
      }
    }
    take(first, at, std::move(reply));
    got += n * row_bytes;
    return Status::OK();
  };
  EMBSTORE_RETURN_NOT_OK(RunUpToFour(batches, fetch));
  *wire_bytes += got;
  return Status::OK();
}

// Hashes of version `expected` of a table of `rows` rows into `hashes`: one a row, or with
// group_rows > 1 one a group of group_rows rows (docs/PROTOCOL.md, "Row hashes"); and the
// checksums of every block. Pages of the server's largest reply, asked for at once (a few in
// flight), so the round trips and the two sides' copying overlap instead of adding up. A server
// may still answer a page short: that page is asked again from where its reply stopped.
// Unimplemented when group hashes were asked for and the server sent row hashes (it predates
// group_rows).
Status HashPages(v1::EmbStore::Stub* stub, const ConnectOptions& options, const std::string& table,
                 std::uint64_t expected, std::uint64_t rows, std::uint64_t group_rows,
                 std::vector<std::uint64_t>* hashes, std::vector<std::uint64_t>* block_checksums,
                 std::uint64_t* bytes, bool* verified) {
  constexpr std::uint64_t kPage = 262144;
  const std::uint64_t units = (rows + group_rows - 1) / group_rows;
  const std::uint64_t pages = (units + kPage - 1) / kPage;
  const char* what = group_rows > 1 ? "group hashes" : "row hashes";
  hashes->resize(units);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> blocks;  // (index, checksum), any order
  std::atomic<std::uint64_t> sent{0};
  std::atomic<bool> all_verified{true};
  std::mutex mu;
  auto fetch_page = [&](std::uint64_t page) -> Status {
    const std::uint64_t end = std::min(units, (page + 1) * kPage);
    std::uint64_t at = page * kPage;
    while (at < end) {
      grpc::ClientContext ctx;
      internal::PrepareContext(&ctx, options, std::nullopt, true);
      v1::RowHashesRequest req;
      req.set_table(table);
      req.set_begin_row(at * group_rows);
      req.set_end_row(std::min(rows, end * group_rows));
      req.set_expected_content_id(expected);
      if (group_rows > 1) req.set_group_rows(static_cast<std::uint32_t>(group_rows));
      v1::RowHashesResponse resp;
      grpc::Status s = stub->RowHashes(&ctx, req, &resp);
      if (!s.ok()) return internal::FromGrpc(s, options.target);
      sent += resp.ByteSizeLong();
      if (!resp.verified()) all_verified = false;
      if (group_rows > 1 && resp.group_hashes().empty() && !resp.row_hashes().empty()) {
        return Status::Unimplemented("server '" + options.target + "' sends no group hashes");
      }
      const std::string& h = group_rows > 1 ? resp.group_hashes() : resp.row_hashes();
      const std::uint64_t n = h.size() / 8;
      if (resp.first_row() != at * group_rows || h.size() % 8 != 0 || n == 0 || n > end - at) {
        return Status::Internal("server '" + options.target + "' answered " + what + " of '" +
                                table + "' from row " + std::to_string(resp.first_row()) +
                                " with " + std::to_string(h.size()) + " bytes, asked for rows " +
                                std::to_string(at * group_rows) + " to " +
                                std::to_string(std::min(rows, end * group_rows)));
      }
      std::memcpy(hashes->data() + at, h.data(), h.size());
      {
        std::lock_guard<std::mutex> lock(mu);
        for (int k = 0; k < resp.block_checksums_size(); ++k) {
          blocks.emplace_back(resp.first_block() + static_cast<std::uint64_t>(k),
                              resp.block_checksums(k));
        }
      }
      at += n;
    }
    return Status::OK();
  };
  const Status st = RunUpToFour(pages, fetch_page);
  *bytes += sent;  // what came, even from a server that turned out to send no group hashes
  EMBSTORE_RETURN_NOT_OK(st);
  *verified = all_verified;
  // Pages that share a block both carry its checksum: keep one per block, and every block from
  // the first to the last must be there.
  std::sort(blocks.begin(), blocks.end());
  block_checksums->clear();
  for (const auto& [b, c] : blocks) {
    if (b < block_checksums->size()) {
      if ((*block_checksums)[b] != c) {
        return Status::Internal("server '" + options.target + "' sent two checksums of block " +
                                std::to_string(b) + " of '" + table + "'");
      }
      continue;
    }
    if (b != block_checksums->size()) {
      return Status::Internal("server '" + options.target + "' sent no checksum of block " +
                              std::to_string(block_checksums->size()) + " of '" + table + "'");
    }
    block_checksums->push_back(c);
  }
  return Status::OK();
}

}  // namespace

void CancelToken::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  for (void* c : contexts_) static_cast<grpc::ClientContext*>(c)->TryCancel();
}

Client::Client(ConnectOptions options) : options_(std::move(options)), impl_(new Impl) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ConnectOptions& options) {
  EMBSTORE_RETURN_NOT_OK(internal::CheckTarget(options.target));
  internal::SettleClockBeforeConnecting();
  std::unique_ptr<Client> c(new Client(options));
  EMBSTORE_ASSIGN_OR_RETURN(c->impl_->creds,
                            internal::MakeCredentials(options, &c->impl_->base_args));
  if (!options.load_balancing.empty()) {
    if (options.load_balancing != "pick_first" && options.load_balancing != "round_robin") {
      return Status::InvalidArgument("load balancing policy '" + options.load_balancing +
                                     "' is neither pick_first nor round_robin");
    }
    c->impl_->base_args.SetLoadBalancingPolicyName(options.load_balancing);
  }
  // Row chunks stay under 4 MiB, but lookups of many rows may be larger.
  c->impl_->base_args.SetMaxReceiveMessageSize(64 << 20);
  // Lookups and hash replies (a sync's) are read into buffers as large as a stream's.
  internal::KeepReceiveBuffersForReuse();
  c->impl_->control =
      grpc::CreateCustomChannel(options.target, c->impl_->creds, c->impl_->base_args);
  c->impl_->stub = v1::EmbStore::NewStub(c->impl_->control);
  return c;
}

Result<std::vector<TableDesc>> Client::ListTables() {
  grpc::ClientContext ctx;
  internal::PrepareContext(&ctx, options_, std::nullopt, true);
  v1::ListTablesResponse resp;
  grpc::Status s = impl_->stub->ListTables(&ctx, v1::ListTablesRequest(), &resp);
  if (!s.ok()) return internal::FromGrpc(s, options_.target);
  std::vector<TableDesc> out;
  for (const auto& t : resp.tables()) {
    EMBSTORE_ASSIGN_OR_RETURN(auto d, proto::FromTableInfo(t, "server '" + options_.target + "'"));
    out.push_back(std::move(d));
  }
  return out;
}

Result<TableDesc> Client::Describe(const std::string& table,
                                   std::optional<Clock::time_point> deadline) {
  grpc::ClientContext ctx;
  if (deadline && options_.rpc_timeout.count() > 0) {
    deadline = std::min(*deadline, Clock::now() + options_.rpc_timeout);
  }
  internal::PrepareContext(&ctx, options_, deadline, true);
  v1::DescribeTableRequest req;
  req.set_table(table);
  v1::TableInfo info;
  grpc::Status s = impl_->stub->DescribeTable(&ctx, req, &info);
  if (!s.ok()) return internal::FromGrpc(s, options_.target);
  return proto::FromTableInfo(info, "server '" + options_.target + "'");
}

Result<std::shared_ptr<const store::Table>> Client::OpenLocal(const TableDesc& desc) {
  EMBSTORE_ASSIGN_OR_RETURN(auto reader, internal::FileReader::OpenServersFile(desc));
  return reader->shared_table();
}

namespace {

// Sends a lookup of `n` items in batches that stay within the server's default limits (16384
// items, about 4 MiB of row data); `fill(req, first, count)` puts items [first, first + count)
// into a request. Every batch is pinned to the table version the first one saw.
Result<LookupResult> LookupBatched(
    const std::shared_ptr<grpc::Channel>& channel, const ConnectOptions& o, const std::string& table, std::size_t n,
    std::optional<std::uint64_t> pinned,
    const std::function<void(v1::LookupRequest*, std::size_t, std::size_t)>& fill) {
  constexpr std::size_t kMaxItems = 16384;
  constexpr std::size_t kMaxBytes = (4u << 20) - (64u << 10);
  LookupResult out;
  std::size_t i = 0;
  do {
    std::size_t batch = std::min<std::size_t>(n - i, 256);  // until the row size is known
    if (pinned && out.dim > 0) {
      std::size_t row_bytes = out.dim * store::DTypeSize(out.dtype);
      batch = std::min({n - i, kMaxItems, std::max<std::size_t>(1, kMaxBytes / row_bytes)});
    }
    v1::LookupRequest req;
    req.set_table(table);
    if (pinned) req.set_expected_content_id(*pinned);
    fill(&req, i, batch);
    LookupReply reply;
    EMBSTORE_RETURN_NOT_OK(CallLookup(channel, o, req, &reply));
    const wire::DecodedLookup& f = reply.fields;
    std::optional<store::DType> dt;
    if (f.dtype <= 3 && v1::DType_IsValid(static_cast<int>(f.dtype))) {
      dt = FromProto(static_cast<v1::DType>(f.dtype));
    }
    if (!dt) return Status::Internal("server '" + o.target + "' sent an unknown dtype");
    out.dim = f.dim;
    out.dtype = *dt;
    pinned = f.content_id;
    // Each row arrives with its checksum (docs/PROTOCOL.md, "Lookup"): a row that does not match
    // is never handed to the caller.
    const std::size_t row_bytes = out.dim * store::DTypeSize(out.dtype);
    std::vector<const std::byte*> rows;
    EMBSTORE_RETURN_NOT_OK(CheckedReplyRows(o.target, table, row_bytes, &reply, &rows));
    out.rows.insert(out.rows.end(), f.rows.begin(), f.rows.end());
    for (std::uint32_t m : f.missing) out.missing.push_back(static_cast<std::uint32_t>(i + m));
    const std::size_t at = out.data.size();
    out.data.resize(at + rows.size() * row_bytes);
    for (std::size_t k = 0; k < rows.size(); ++k) {
      std::memcpy(out.data.data() + at + k * row_bytes, rows[k], row_bytes);
    }
    i += batch;
  } while (i < n);
  return out;
}

}  // namespace

Result<LookupResult> Client::LookupRows(const std::string& table,
                                        std::span<const std::uint64_t> rows,
                                        std::optional<std::uint64_t> expected_content_id) {
  return LookupBatched(impl_->control, options_, table, rows.size(), expected_content_id,
                       [&](v1::LookupRequest* req, std::size_t first, std::size_t count) {
                         auto* ids = req->mutable_rows();
                         for (std::size_t j = first; j < first + count; ++j) ids->add_ids(rows[j]);
                       });
}

Status Client::LookupRowsInto(const std::string& table, std::span<const std::uint64_t> ids,
                              std::uint64_t content_id, std::size_t row_bytes,
                              std::span<std::byte> out, std::uint64_t* wire_bytes) {
  if (row_bytes == 0 || out.size() != ids.size() * row_bytes) {
    return Status::InvalidArgument("buffer for " + std::to_string(ids.size()) + " rows of table '" +
                                   table + "' holds " + std::to_string(out.size()) + " bytes");
  }
  return LookupRowBatches(
      impl_->control, options_, table, ids, content_id, row_bytes,
      [&](std::size_t first, const std::vector<const std::byte*>& rows,
          std::shared_ptr<LookupReply>) {
        for (std::size_t k = 0; k < rows.size(); ++k) {
          std::memcpy(out.data() + (first + k) * row_bytes, rows[k], row_bytes);
        }
      },
      wire_bytes);
}

Status Client::LookupRowsHeld(const std::string& table, std::span<const std::uint64_t> ids,
                              std::uint64_t content_id, std::size_t row_bytes, HeldRows* held,
                              std::uint64_t* wire_bytes) {
  if (row_bytes == 0) {
    return Status::InvalidArgument("rows of 0 bytes of table '" + table + "'");
  }
  held->rows.assign(ids.size(), nullptr);
  std::mutex mu;  // guards held->pieces; each reply fills rows of its own
  return LookupRowBatches(
      impl_->control, options_, table, ids, content_id, row_bytes,
      [&](std::size_t first, const std::vector<const std::byte*>& rows,
          std::shared_ptr<LookupReply> reply) {
        std::copy(rows.begin(), rows.end(), held->rows.begin() + static_cast<std::ptrdiff_t>(first));
        std::lock_guard lock(mu);
        held->pieces.push_back(std::move(reply));
      },
      wire_bytes);
}

Result<LookupResult> Client::LookupKeys(const std::string& table,
                                        std::span<const std::string> keys) {
  return LookupBatched(impl_->control, options_, table, keys.size(), std::nullopt,
                       [&](v1::LookupRequest* req, std::size_t first, std::size_t count) {
                         auto* ks = req->mutable_keys();
                         for (std::size_t j = first; j < first + count; ++j) ks->add_keys(keys[j]);
                       });
}

Status Client::RowHashes(const std::string& table, std::uint64_t expected_content_id,
                         std::uint64_t rows, std::vector<std::uint64_t>* row_hashes,
                         std::vector<std::uint64_t>* block_checksums, std::uint64_t* bytes,
                         bool* verified) {
  return HashPages(impl_->stub.get(), options_, table, expected_content_id, rows, 1, row_hashes,
                   block_checksums, bytes, verified);
}

Status Client::RowHashesAgainst(const std::string& table, std::uint64_t expected_content_id,
                                std::uint64_t rows, std::uint32_t group_rows,
                                const LocalRowHashes& local, const DifferingGroups& arrived,
                                std::uint32_t* answered_group_rows,
                                std::vector<std::uint64_t>* groups,
                                std::vector<std::uint64_t>* row_hashes,
                                std::vector<std::uint64_t>* block_checksums, std::uint64_t* bytes,
                                bool* verified) {
  if (group_rows < 2 || group_rows > 65536) {
    return Status::InvalidArgument("row hashes of '" + table + "' in groups of " +
                                   std::to_string(group_rows) + " rows: 2 to 65536 a group");
  }
  const std::uint64_t g_rows = group_rows;
  std::vector<std::uint64_t> group_hashes;
  bool groups_verified = false;
  groups->clear();
  row_hashes->clear();
  *answered_group_rows = 0;
  Status st = HashPages(impl_->stub.get(), options_, table, expected_content_id, rows, g_rows,
                        &group_hashes, block_checksums, bytes, &groups_verified);
  if (st.code() == StatusCode::kUnimplemented) {
    return RowHashes(table, expected_content_id, rows, row_hashes, block_checksums, bytes,
                     verified);
  }
  *answered_group_rows = group_rows;
  EMBSTORE_RETURN_NOT_OK(st);
  // Segment by segment, in row order: once the copy's hashes of a segment are in, the groups of
  // it that differ are asked for (and handed to `arrived`) on a thread of their own while the
  // copy's later rows are still being hashed, so that the round trips overlap the hashing
  // instead of following it.
  const std::uint64_t segment_groups =
      std::max<std::uint64_t>(kMinSegmentRows / g_rows, (group_hashes.size() + 7) / 8);
  struct Segment {
    std::vector<std::uint64_t> groups;  // that differ, ascending
    std::vector<std::uint64_t> hashes;  // their rows' hashes, group after group
    Status status;
  };
  const std::size_t segments = (group_hashes.size() + segment_groups - 1) / segment_groups;
  std::vector<Segment> parts(segments);
  std::atomic<std::uint64_t> sent{0};
  std::atomic<bool> all_verified{groups_verified};
  // The row hashes of a segment's groups that differ, in requests of at most one reply's rows.
  auto fetch = [&](Segment& part, std::span<const std::uint64_t> mine) -> Status {
    const std::size_t per_request = std::max<std::uint64_t>(1, 262144 / g_rows);
    std::vector<std::uint64_t> offset{0};
    for (const std::uint64_t g : part.groups) {
      offset.push_back(offset.back() + store::RowGroupOf(g, g_rows, rows).size());
    }
    part.hashes.resize(offset.back());
    for (std::size_t from = 0; from < part.groups.size(); from += per_request) {
      const std::size_t to = std::min(part.groups.size(), from + per_request);
      grpc::ClientContext ctx;
      internal::PrepareContext(&ctx, options_, std::nullopt, true);
      v1::RowHashesRequest req;
      req.set_table(table);
      req.set_expected_content_id(expected_content_id);
      req.set_group_rows(group_rows);
      for (std::size_t k = from; k < to; ++k) req.add_groups(part.groups[k]);
      const std::uint64_t want = offset[to] - offset[from];
      v1::RowHashesResponse resp;
      grpc::Status s = impl_->stub->RowHashes(&ctx, req, &resp);
      if (!s.ok()) return internal::FromGrpc(s, options_.target);
      sent += resp.ByteSizeLong();
      if (!resp.verified()) all_verified = false;
      const std::string& h = resp.row_hashes();
      if (h.size() != want * 8) {
        return Status::Internal("server '" + options_.target + "' answered the row hashes of " +
                                std::to_string(to - from) + " groups of '" + table + "' with " +
                                std::to_string(h.size()) + " bytes, not " +
                                std::to_string(want * 8));
      }
      std::memcpy(part.hashes.data() + offset[from], h.data(), h.size());
    }
    return arrived ? arrived(part.groups, part.hashes, mine) : Status::OK();
  };
  std::vector<std::thread> pool;
  Status failed;
  for (std::size_t i = 0; i < segments; ++i) {
    const std::uint64_t g_first = i * segment_groups;
    const std::uint64_t g_last =
        std::min<std::uint64_t>(group_hashes.size(), g_first + segment_groups);
    const std::span<const std::uint64_t> mine = local(std::min(rows, g_last * g_rows));
    if (mine.size() != rows) {
      failed = Status::InvalidArgument("a copy's " + std::to_string(mine.size()) +
                                       " row hashes against the " + std::to_string(rows) +
                                       " rows of table '" + table + "'");
      break;
    }
    for (std::uint64_t g = g_first; g < g_last; ++g) {
      const store::RowGroup group = store::RowGroupOf(g, g_rows, rows);
      if (store::RowGroupHash(mine.subspan(group.first, group.size())) != group_hashes[g]) {
        parts[i].groups.push_back(g);
      }
    }
    if (parts[i].groups.empty()) continue;
    pool.emplace_back([&, i, mine] { parts[i].status = fetch(parts[i], mine); });
  }
  for (auto& th : pool) th.join();
  EMBSTORE_RETURN_NOT_OK(failed);
  for (Segment& part : parts) {
    EMBSTORE_RETURN_NOT_OK(part.status);
    groups->insert(groups->end(), part.groups.begin(), part.groups.end());
    row_hashes->insert(row_hashes->end(), part.hashes.begin(), part.hashes.end());
  }
  *bytes += sent;
  *verified = all_verified;
  return Status::OK();
}

Result<std::vector<std::string>> Client::Keys(const std::string& table, std::uint64_t begin,
                                              std::optional<std::uint64_t> end) {
  grpc::ClientContext ctx;
  internal::PrepareContext(&ctx, options_, std::nullopt, false);
  v1::StreamKeysRequest req;
  req.set_table(table);
  req.set_begin_row(begin);
  if (end) req.set_end_row(*end);
  auto reader = impl_->stub->StreamKeys(&ctx, req);
  std::vector<std::string> out;
  v1::KeyChunk chunk;
  std::optional<std::uint64_t> content;
  while (reader->Read(&chunk)) {
    if (chunk.first_row() != begin + out.size()) {
      ctx.TryCancel();
      return Status::Internal("server sent keys from row " + std::to_string(chunk.first_row()) +
                              ", expected row " + std::to_string(begin + out.size()));
    }
    if (content && *content != chunk.content_id()) {
      ctx.TryCancel();
      return Status::FailedPrecondition("table '" + table + "' changed while its keys streamed");
    }
    content = chunk.content_id();
    std::size_t pos = 0;
    for (std::uint32_t len : chunk.key_lengths()) {
      if (pos + len > chunk.key_data().size()) {
        ctx.TryCancel();
        return Status::Internal("server sent a malformed key chunk");
      }
      out.emplace_back(chunk.key_data().substr(pos, len));
      pos += len;
    }
  }
  grpc::Status s = reader->Finish();
  if (!s.ok()) return internal::FromGrpc(s, options_.target);
  return out;
}

}  // namespace embstore::client
