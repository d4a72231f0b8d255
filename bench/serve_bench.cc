// Loopback throughput and memory benchmark of `embstore serve`.
//
// In one run it measures, on this machine:
//   1. iperf3's single-stream loopback throughput (the ceiling for one TCP connection);
//   2. one client pulling a whole table from `embstore serve` (zero-copy send path);
//   3. the same client pulling from a naive server that copies each chunk into a protobuf
//      `bytes` field (the baseline the zero-copy path is measured against);
//   4. 32 clients (or each count in --clients 1,4,16,64) pulling the whole table at once,
//      sampling the server's RSS: anonymous memory growth (what the server allocates) is reported
//      apart from file pages (the mapping).
// and prints each figure and the ratios. Speed is never asserted; see docs/SERVING.md.
//
// The pull client receives every chunk as gRPC slices, walks the RowChunk encoding without
// copying the payload, and (unless --no-verify) checks each block against its stored checksum.
//
// The single-client figures come from rounds of (iperf3, one pull from each server), interleaved
// so that load from other work on the machine hits all three alike.
//
// Usage: serve_bench [--embstore PATH] [--rows N] [--dim D] [--chunk-bytes B] [--seconds S]
//                    [--repeats N] [--clients N[,N...]] [--no-verify] [--keep DIR] [--json FILE]
#include <fcntl.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "bench_util.h"
#include "embstore/testkit/temp_dir.h"
#include "embstore/proto/row_chunk_codec.h"
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "embstore/store/table.h"
#include "embstore/store/writer.h"
#include "embstore/v1/embstore.grpc.pb.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string embstore = EMBSTORE_BIN;
  std::uint64_t rows = 938280;
  std::uint64_t dim = 128;
  std::uint64_t chunk_bytes = 0;
  int seconds = 3;
  std::vector<int> clients = {32};
  int repeats = 5;
  bool verify = true;
  std::string keep;  // reuse/keep the table directory
  std::string json;  // also write the results here
};

using embstore::bench::AwaitLogOrExit;
using embstore::bench::StartChild;
using embstore::bench::IperfBytesPerSecond;
using embstore::bench::ReadRss;
using embstore::bench::Rss;

// ---- the pull client -------------------------------------------------------------------------

// Hands out the payload of a decoded RowChunk (pieces of gRPC's slices) in order, as a stream.
class PayloadCursor {
 public:
  explicit PayloadCursor(const std::vector<embstore::wire::Piece>& pieces) : pieces_(pieces) {}
  // Calls fn(ptr, len) over the next n bytes, piece by piece.
  template <typename Fn>
  bool Consume(std::uint64_t n, Fn fn) {
    while (n > 0) {
      while (i_ < pieces_.size() && off_ >= pieces_[i_].size()) {
        ++i_;
        off_ = 0;
      }
      if (i_ >= pieces_.size()) return false;
      const std::size_t take =
          static_cast<std::size_t>(std::min<std::uint64_t>(pieces_[i_].size() - off_, n));
      fn(pieces_[i_].data() + off_, take);
      off_ += take;
      n -= take;
    }
    return true;
  }

 private:
  const std::vector<embstore::wire::Piece>& pieces_;
  std::size_t i_ = 0, off_ = 0;
};

struct PullResult {
  bool ok = false;
  std::string error;
  std::uint64_t bytes = 0;
  std::uint64_t rows = 0;
  double seconds = 0;
};

// Verifies a stream's chunks as their payload goes by (PROTOCOL.md, "Verifying a chunk"): every
// block the stream sends entirely against its stored checksum, hashing across consecutive chunks
// when a block arrives in pieces, and payload_checksum where the server sent one.
class StreamVerifier {
 public:
  StreamVerifier() : block_(XXH3_createState()), whole_(XXH3_createState()) {}
  ~StreamVerifier() {
    XXH3_freeState(block_);
    XXH3_freeState(whole_);
  }
  std::uint64_t row_bytes = 0, block_rows = 0, rows = 0, begin = 0, end = 0;

  bool Check(std::uint64_t first_row, std::uint64_t row_count, std::uint64_t first_block,
             const std::vector<std::uint64_t>& sums, bool has_payload_sum,
             std::uint64_t payload_sum, PayloadCursor* cur, std::string* error) {
    XXH3_64bits_reset(whole_);
    std::uint64_t row = first_row;
    const std::uint64_t stop = first_row + row_count;
    while (row < stop) {
      const std::uint64_t b = row / block_rows;
      const std::uint64_t b_begin = b * block_rows;
      const std::uint64_t b_end = std::min(rows, b_begin + block_rows);
      const std::uint64_t piece_end = std::min(stop, b_end);
      const bool cut = b_begin < begin || b_end > end;
      if (!cut && row == b_begin) {
        XXH3_64bits_reset(block_);
        open_block_ = b;
      }
      const bool hash_block = !cut && open_block_ == b;
      bool ok =
          cur->Consume((piece_end - row) * row_bytes, [&](const std::uint8_t* p, std::size_t n) {
            if (has_payload_sum) XXH3_64bits_update(whole_, p, n);
            if (hash_block) XXH3_64bits_update(block_, p, n);
          });
      if (!ok) {
        *error = "chunk shorter than its row_count";
        return false;
      }
      if (hash_block && piece_end == b_end) {
        if (XXH3_64bits_digest(block_) != sums.at(b - first_block)) {
          *error = "block " + std::to_string(b) + " fails its checksum";
          return false;
        }
        open_block_ = ~0ull;
      }
      row = piece_end;
    }
    if (has_payload_sum && XXH3_64bits_digest(whole_) != payload_sum) {
      *error = "payload checksum mismatch at row " + std::to_string(first_row);
      return false;
    }
    return true;
  }

 private:
  XXH3_state_t* block_;
  XXH3_state_t* whole_;
  std::uint64_t open_block_ = ~0ull;
};

PullResult Pull(const std::string& target, const std::string& table, std::uint64_t chunk_bytes,
                bool verify, int channel_id) {
  PullResult r;
  grpc::ChannelArguments args;
  args.SetInt("embstore.bench.channel", channel_id);  // one connection per client
  args.SetMaxReceiveMessageSize(4 << 20);             // the stock default, stated
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  embstore::v1::StreamRowsRequest req;
  req.set_table(table);
  req.set_chunk_bytes(chunk_bytes);
  std::string req_bytes = req.SerializeAsString();
  grpc::Slice req_slice(req_bytes);
  grpc::ByteBuffer req_buf(&req_slice, 1);

  const auto start = Clock::now();
  auto call = stub.PrepareCall(&ctx, "/embstore.v1.EmbStore/StreamRows", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  call->WriteLast(req_buf, grpc::WriteOptions(), reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  StreamVerifier verifier;
  std::vector<grpc::Slice> slices;
  std::vector<embstore::wire::Piece> pieces;
  embstore::wire::DecodedRowChunk chunk;
  for (;;) {
    grpc::ByteBuffer bb;
    call->Read(&bb, reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    if (!ok) break;
    slices.clear();
    (void)bb.Dump(&slices);
    pieces.clear();
    for (const auto& slice : slices) pieces.emplace_back(slice.begin(), slice.size());
    // The shared wire codec decodes the header; the payload stays in the slices.
    if (!embstore::wire::DecodeRowChunk(pieces, &chunk, &r.error)) break;
    const embstore::wire::RowChunkFields& f = chunk.fields;
    if (!f.table_info.empty()) {  // the first chunk: the table's geometry, for the verifier
      embstore::v1::TableInfo ti;
      ti.ParseFromString(f.table_info);
      verifier.row_bytes = ti.row_bytes();
      verifier.block_rows = ti.block_rows();
      verifier.rows = ti.rows();
      verifier.begin = 0;  // the benchmark always pulls whole tables
      verifier.end = ti.rows();
    }
    r.bytes += f.payload_size;
    if (verify) {
      PayloadCursor cur(chunk.payload);
      if (!verifier.Check(f.first_row, f.row_count, f.first_block, f.block_checksums,
                          f.payload_checksum.has_value(), f.payload_checksum.value_or(0), &cur,
                          &r.error)) {
        r.ok = false;
        ctx.TryCancel();
      }
    }
    const std::uint64_t row_count = f.row_count;
    r.rows += row_count;
  }
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok() && r.error.empty()) r.error = status.error_message();
  r.ok = status.ok() && r.error.empty();
  return r;
}

// ---- the naive baseline server ---------------------------------------------------------------

// Serves StreamRows the straightforward way: each chunk's rows are copied into the protobuf
// `bytes` field and the message is serialized by gRPC (a second copy). Same chunking as the
// real server (one checksum block a chunk), so the client and the wire format are identical.
class NaiveService final : public embstore::v1::EmbStore::Service {
 public:
  explicit NaiveService(std::shared_ptr<const embstore::store::Table> t) : t_(std::move(t)) {}
  grpc::Status StreamRows(grpc::ServerContext* ctx, const embstore::v1::StreamRowsRequest*,
                          grpc::ServerWriter<embstore::v1::RowChunk>* w) override {
    const std::uint64_t br = t_->block_rows();
    for (std::uint64_t row = 0, b = 0; row < t_->rows() && !ctx->IsCancelled(); row += br, ++b) {
      const std::uint64_t end = std::min(t_->rows(), row + br);
      embstore::v1::RowChunk c;
      c.set_first_row(row);
      c.set_row_count(end - row);
      c.set_first_block(b);
      c.add_block_checksums(t_->BlockChecksum(b));
      if (row == 0) {
        c.mutable_table()->set_rows(t_->rows());
        c.mutable_table()->set_row_bytes(t_->row_bytes());
        c.mutable_table()->set_block_rows(br);
      }
      auto bytes = t_->RowBytes(row, end).value();
      c.set_payload(reinterpret_cast<const char*>(bytes.data()), bytes.size());
      if (!w->Write(c)) break;
    }
    return grpc::Status::OK;
  }

 private:
  std::shared_ptr<const embstore::store::Table> t_;
};

int RunNaiveServer(const std::string& path) {
  auto t = embstore::store::Table::Open(path);
  if (!t.ok()) {
    std::fprintf(stderr, "naive server: %s\n", t.status().ToString().c_str());
    return 1;
  }
  NaiveService service(*t);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  std::fprintf(stderr, "{\"msg\":\"listening\",\"addresses\":[\"127.0.0.1:%d\"]}\n", port);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &s, nullptr);
  int sig;
  sigwait(&s, &sig);
  server->Shutdown(std::chrono::system_clock::now());
  return 0;
}

// ---- driver ----------------------------------------------------------------------------------

std::string MakeTable(const Options& o, const std::string& dir) {
  const std::string path = dir + "/bench.emb";
  if (std::filesystem::exists(path)) {
    auto t = embstore::store::Table::Open(path);
    if (t.ok() && (*t)->rows() == o.rows && (*t)->dim() == o.dim) return path;
  }
  std::fprintf(stderr, "writing %llu x %llu f32 table to %s ...\n",
               static_cast<unsigned long long>(o.rows), static_cast<unsigned long long>(o.dim),
               path.c_str());
  embstore::store::WriterOptions wo;
  wo.dim = o.dim;
  wo.overwrite = true;
  auto w = embstore::store::TableWriter::Create(path, wo).value();
  std::vector<float> batch(8192 * o.dim);
  std::uint64_t done = 0;
  std::uint32_t x = 12345;
  while (done < o.rows) {
    const std::uint64_t n = std::min<std::uint64_t>(8192, o.rows - done);
    for (std::uint64_t i = 0; i < n * o.dim; ++i) {
      x = x * 1664525u + 1013904223u;
      batch[i] = static_cast<float>(x >> 8) / static_cast<float>(1 << 24) - 0.5f;
    }
    if (!w->AppendRowsF32(std::span<const float>(batch.data(), n * o.dim)).ok()) std::exit(1);
    done += n;
  }
  if (!w->Finish().ok()) std::exit(1);
  return path;
}

// One whole-table pull; its throughput in bytes/s. Exits on a failed pull.
double TimedPull(const Options& o, const std::string& target, const char* what, int id) {
  PullResult r = Pull(target, "bench", o.chunk_bytes, o.verify, id);
  if (!r.ok || r.rows != o.rows) {
    std::fprintf(stderr, "serve_bench: %s pull failed: %s (rows %llu)\n", what, r.error.c_str(),
                 static_cast<unsigned long long>(r.rows));
    std::exit(1);
  }
  return r.bytes / r.seconds;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double Gb(double bytes_per_s) { return bytes_per_s / 1e9; }

// `clients` whole-table pulls at once from the server at `target` (process `pid`), sampling its
// RSS. Anonymous (+shmem) memory is what the server allocates; file-backed is the mapping.
struct Concurrent {
  double seconds = 0;
  long anon_base_kb = 0, anon_peak_kb = 0, file_peak_kb = 0, total_peak_kb = 0;
};
Concurrent PullConcurrently(const Options& o, int clients, const std::string& target, pid_t pid) {
  Concurrent c;
  const Rss before = ReadRss(pid);
  c.anon_base_kb = c.anon_peak_kb = before.anon_kb + before.shmem_kb;
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling.load()) {
      Rss r = ReadRss(pid);
      c.anon_peak_kb = std::max(c.anon_peak_kb, r.anon_kb + r.shmem_kb);
      c.file_peak_kb = std::max(c.file_peak_kb, r.file_kb);
      c.total_peak_kb = std::max(c.total_peak_kb, r.total_kb);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::vector<std::thread> pullers;
  std::atomic<int> failures{0};
  const auto t0 = Clock::now();
  for (int i = 0; i < clients; ++i) {
    pullers.emplace_back([&, i] {
      PullResult r = Pull(target, "bench", o.chunk_bytes, o.verify, 2000 + i);
      if (!r.ok || r.rows != o.rows) failures.fetch_add(1);
    });
  }
  for (auto& t : pullers) t.join();
  c.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  sampling.store(false);
  sampler.join();
  if (failures.load() > 0) {
    std::fprintf(stderr, "serve_bench: %d concurrent pulls from %s failed\n", failures.load(),
                 target.c_str());
    std::exit(1);
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "serve_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--naive-server") return RunNaiveServer(next());
    if (a == "--embstore")
      o.embstore = next();
    else if (a == "--rows")
      o.rows = std::stoull(next());
    else if (a == "--dim")
      o.dim = std::stoull(next());
    else if (a == "--chunk-bytes")
      o.chunk_bytes = std::stoull(next());
    else if (a == "--seconds")
      o.seconds = std::stoi(next());
    else if (a == "--clients") {
      o.clients.clear();
      std::stringstream list(next());
      for (std::string item; std::getline(list, item, ',');) o.clients.push_back(std::stoi(item));
      if (o.clients.empty() || *std::min_element(o.clients.begin(), o.clients.end()) < 1) {
        std::fprintf(stderr, "serve_bench: --clients wants counts >= 1, e.g. 1,4,16\n");
        return 2;
      }
    } else if (a == "--repeats")
      o.repeats = std::stoi(next());
    else if (a == "--no-verify")
      o.verify = false;
    else if (a == "--keep")
      o.keep = next();
    else if (a == "--json")
      o.json = next();
    else if (a == "--help" || a == "-h") {
      std::printf(
          "serve_bench: loopback throughput of embstore serve vs iperf3 and a naive copying "
          "server, and server memory under concurrent pulls.\n"
          "  --embstore PATH    the embstore binary (default: the one built with this)\n"
          "  --rows N --dim D   table shape (default 938280 x 128 f32)\n"
          "  --chunk-bytes B    chunk size asked for (default: server default)\n"
          "  --seconds S        duration of each iperf3 run (default 3)\n"
          "  --clients N[,N..]  concurrent pulls for the memory figure (default 32); a list\n"
          "                     measures each count in turn\n"
          "  --repeats N        rounds of iperf3 + one pull from each server (default 5)\n"
          "  --no-verify        skip checksum verification in the client\n"
          "  --keep DIR         write the table into DIR and keep it (default: a temp dir)\n"
          "  --json FILE        also write the results as JSON to FILE\n");
      return 0;
    } else {
      std::fprintf(stderr, "serve_bench: unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  embstore::testkit::TempDir temp("serve-bench");
  const std::string dir = o.keep.empty() ? temp.path() : o.keep;
  std::filesystem::create_directories(dir);
  const std::string path = MakeTable(o, dir);
  const double table_bytes = static_cast<double>(o.rows * o.dim * 4);

  // Rounds of (iperf3, serve pull, naive pull), interleaved so that load from other work on the
  // machine hits all three alike. Reported: the best of each, and the median of the per-round
  // ratios.
  auto server = StartChild(o.embstore, {"serve", "--store", dir, "--listen", "127.0.0.1:0"}, true);
  const std::string target = AwaitLogOrExit(*server, "listening")["addresses"][0];
  auto naive_server = StartChild("/proc/self/exe", {"--naive-server", path}, true);
  const std::string naive_target = AwaitLogOrExit(*naive_server, "listening")["addresses"][0];
  double iperf = 0, served = 0, naive = 0;
  std::vector<double> ratio_iperf, ratio_naive;
  for (int round = 0; round < o.repeats; ++round) {
    std::fprintf(stderr, "round %d of %d: iperf3 %d s, embstore serve, naive server ...\n",
                 round + 1, o.repeats, o.seconds);
    const double i = IperfBytesPerSecond(o.seconds);
    const double s1 = TimedPull(o, target, "embstore serve", 1000 + round);
    const double n1 = TimedPull(o, naive_target, "naive server", 1500 + round);
    iperf = std::max(iperf, i);
    served = std::max(served, s1);
    naive = std::max(naive, n1);
    if (i > 0) ratio_iperf.push_back(s1 / i);
    ratio_naive.push_back(s1 / n1);
  }
  std::vector<Concurrent> zcs, nvs;
  for (int n : o.clients) {
    std::fprintf(stderr, "%d concurrent pulls from each server ...\n", n);
    zcs.push_back(PullConcurrently(o, n, target, server->pid()));
    nvs.push_back(PullConcurrently(o, n, naive_target, naive_server->pid()));
  }
  naive_server->Stop(SIGTERM);
  server->Stop(SIGTERM);

  std::printf("table                      %llu x %llu f32, %.1f MiB\n",
              static_cast<unsigned long long>(o.rows), static_cast<unsigned long long>(o.dim),
              table_bytes / (1 << 20));
  std::printf("client verifies checksums  %s\n", o.verify ? "yes" : "no");
  std::printf("iperf3 single stream       %.2f GB/s\n", Gb(iperf));
  std::printf("rounds                     %d (best of each shown)\n", o.repeats);
  std::printf("embstore serve, 1 client   %.2f GB/s\n", Gb(served));
  std::printf("naive copying server       %.2f GB/s\n", Gb(naive));
  std::printf("ratio serve / iperf3       %.2f best/best, %.2f median of rounds (target >= 0.70)\n",
              served / iperf, Median(ratio_iperf));
  std::printf("ratio serve / naive        %.2f best/best, %.2f median of rounds\n", served / naive,
              Median(ratio_naive));
  nlohmann::ordered_json concurrent = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < o.clients.size(); ++i) {
    const int n = o.clients[i];
    const Concurrent& zc = zcs[i];
    const Concurrent& nv = nvs[i];
    std::printf("%d concurrent pulls        serve %.2f GB/s, naive %.2f GB/s aggregate\n", n,
                Gb(table_bytes * n / zc.seconds), Gb(table_bytes * n / nv.seconds));
    std::printf("server anon RSS growth     %.1f MiB   (target <= 64; base %.1f, peak %.1f MiB)\n",
                (zc.anon_peak_kb - zc.anon_base_kb) / 1024.0, zc.anon_base_kb / 1024.0,
                zc.anon_peak_kb / 1024.0);
    std::printf("naive server anon growth   %.1f MiB\n",
                (nv.anon_peak_kb - nv.anon_base_kb) / 1024.0);
    std::printf("server file-backed RSS     %.1f MiB peak (the mapped table pages)\n",
                zc.file_peak_kb / 1024.0);
    std::printf("server total RSS           %.1f MiB peak\n", zc.total_peak_kb / 1024.0);
    auto side = [&](const Concurrent& c) {
      return nlohmann::ordered_json{{"aggregate_bytes_per_s", table_bytes * n / c.seconds},
                                    {"seconds", c.seconds},
                                    {"anon_base_kib", c.anon_base_kb},
                                    {"anon_peak_kib", c.anon_peak_kb},
                                    {"anon_growth_kib", c.anon_peak_kb - c.anon_base_kb},
                                    {"file_peak_kib", c.file_peak_kb},
                                    {"total_peak_kib", c.total_peak_kb}};
    };
    concurrent.push_back({{"clients", n}, {"serve", side(zc)}, {"naive", side(nv)}});
  }
  if (!o.json.empty()) {
    nlohmann::ordered_json j;
    j["rows"] = o.rows;
    j["dim"] = o.dim;
    j["bytes"] = table_bytes;
    j["verify"] = o.verify;
    j["rounds"] = o.repeats;
    j["iperf3_bytes_per_s"] = iperf;
    j["serve_bytes_per_s"] = served;
    j["naive_bytes_per_s"] = naive;
    j["ratio_serve_iperf3_median"] = Median(ratio_iperf);
    j["ratio_serve_naive_median"] = Median(ratio_naive);
    j["concurrent"] = concurrent;
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  return 0;
}
