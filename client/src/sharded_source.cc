// RowSource over a table sharded by a manifest (row_source.h, sharded.h): each shard is a child
// RowSource of its own, opened through OpenSource from the shard's target and table, checked
// against the manifest, and kept for every later read. Rows and keys of a shard are read only
// through its child; the children are asked in parallel for rows, in turn for keys.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "embstore/client/health.h"
#include "embstore/client/open_source.h"
#include "embstore/client/row_source.h"
#include "embstore/client/sharded.h"
#include "embstore/store/dtype.h"
#include "fan_out.h"
#include "sources.h"

namespace embstore::client {
namespace {

using Clock = std::chrono::steady_clock;

std::string Range(std::uint64_t b, std::uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

class ShardedSource final : public RowSource {
 public:
  ShardedSource(ShardManifest manifest, const SourceOptions& options)
      : manifest_(std::move(manifest)), options_(options) {
    options_.describe_shards = false;  // unused for children, which are never manifests
    for (std::size_t i = 0; i < manifest_.shards.size(); ++i) {
      slots_.push_back(std::make_unique<Slot>());
    }
    desc_.name = manifest_.table;
    desc_.rows = manifest_.rows;
    desc_.dim = manifest_.dim;
    desc_.dtype = manifest_.dtype;
    desc_.row_bytes = manifest_.dim * store::DTypeSize(manifest_.dtype);
  }

  // Opens every shard now (one attempt each), and fills what only the shards know: whether
  // every shard has keys, the largest checksum block, the keys' bytes.
  Status OpenAll() {
    desc_.has_keys = !manifest_.shards.empty();
    desc_.block_rows = 0;
    desc_.key_bytes = 0;
    for (int i = 0; i < shard_count(); ++i) {
      EMBSTORE_ASSIGN_OR_RETURN(RowSource * child, Child(i, ReadOptions{}, nullptr, std::nullopt));
      const TableDesc& d = child->desc();
      desc_.has_keys = desc_.has_keys && d.has_keys;
      desc_.block_rows = std::max(desc_.block_rows, d.block_rows);
      desc_.key_bytes += d.key_bytes;
    }
    return Status::OK();
  }

  std::string_view kind() const override { return "sharded"; }
  const std::string& location() const override { return manifest_.origin; }

  std::uint64_t transferred_bytes() const override {
    std::uint64_t sum = 0;
    for (const auto& slot : slots_) {
      std::lock_guard<std::mutex> lock(slot->mu);
      if (slot->source) sum += slot->source->transferred_bytes();
    }
    return sum;
  }

  // Every shard overlapping [begin, end), in parallel: each waits for its child (a server that
  // is down is retried with the read's backoff), then reads its part straight into place.
  Result<LoadStats> CopyRows(std::uint64_t begin, std::uint64_t end, std::span<std::byte> out,
                             const ReadOptions& options) override {
    EMBSTORE_ASSIGN_OR_RETURN(const std::uint64_t need, OutputBytes(begin, end, options.to_f32));
    if (out.size() != need) {
      return Status::InvalidArgument("buffer for table '" + desc_.name + "' of manifest '" +
                                     manifest_.origin + "' holds " + std::to_string(out.size()) +
                                     " bytes, the read needs " + std::to_string(need));
    }
    const auto start = Clock::now();
    const std::uint64_t out_row = options.to_f32 ? desc_.dim * 4 : desc_.row_bytes;
    const std::optional<Clock::time_point> deadline =
        options.timeout.count() > 0 ? std::optional(start + options.timeout) : std::nullopt;

    struct Part {
      int shard;
      std::uint64_t begin, end;  // logical rows
      LoadStats stats;
    };
    std::vector<Part> parts;
    for (int i = 0; i < shard_count(); ++i) {
      const ShardSpec& s = manifest_.shards[i];
      const std::uint64_t b = std::max(begin, s.begin), e = std::min(end, s.end);
      if (b < e) parts.push_back({i, b, e, {}});
    }
    internal::FanOut fan;  // one worker a shard; its cancel token stops every shard's read
    std::vector<std::atomic<std::uint64_t>> done(parts.size());
    auto cancelled = [&] {
      return fan.cancel().cancelled() || (options.cancel && options.cancel->cancelled());
    };

    auto run_part = [&](std::size_t slot) -> Status {
      Part& p = parts[slot];
      const ShardSpec& s = manifest_.shards[p.shard];
      EMBSTORE_ASSIGN_OR_RETURN(RowSource * child, Child(p.shard, options, &fan, deadline));
      ReadOptions o = options;
      o.cancel = &fan.cancel();
      if (deadline) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
        if (left.count() <= 0) {
          return Status::DeadlineExceeded(ShardName(p.shard) + ": read timed out");
        }
        o.timeout = left;
      }
      o.progress = [&done, slot, &cancelled](std::uint64_t bytes, std::uint64_t) {
        done[slot].store(bytes, std::memory_order_relaxed);
        return !cancelled();
      };
      o.on_event = [&fan, &p, this](const LoadEvent& e) {
        LoadEvent ev = e;
        ev.stream = p.shard;
        ev.message = ShardName(p.shard) + " stream " + std::to_string(e.stream) + ": " + e.message;
        fan.Post(std::move(ev));
      };
      if (options.after_chunk) {
        o.after_chunk = [&options, &p, &s](int, std::uint64_t first_row) {
          options.after_chunk(p.shard, first_row + s.begin);
        };
      }
      auto part = out.subspan((p.begin - begin) * out_row, (p.end - p.begin) * out_row);
      auto stats = child->CopyRows(p.begin - s.begin, p.end - s.begin, part, o);
      if (!stats.ok()) {
        return Status(stats.status().code(), ShardName(p.shard) + ": " + stats.status().message());
      }
      p.stats = *stats;
      return Status::OK();
    };

    // The calling thread runs the callbacks and watches the caller's cancel token.
    bool user_cancelled = false;
    auto total_done = [&] {
      std::uint64_t sum = 0;
      for (auto& d : done) sum += d.load(std::memory_order_relaxed);
      return sum;
    };
    if (options.progress && !options.progress(0, need)) user_cancelled = true;
    Status st = Status::OK();
    if (!user_cancelled) {
      st = fan.Run(static_cast<int>(parts.size()),
                   [&](int slot) { return run_part(static_cast<std::size_t>(slot)); },
                   options.on_event, [&]() -> Status {
                     if ((options.cancel && options.cancel->cancelled()) ||
                         (options.progress && !options.progress(total_done(), need))) {
                       user_cancelled = true;
                       return Status::Cancelled("read cancelled");
                     }
                     return Status::OK();
                   });
    }
    if (user_cancelled || (options.cancel && options.cancel->cancelled())) {
      return Status::Cancelled("read of table '" + desc_.name + "' of manifest '" +
                               manifest_.origin + "' cancelled");
    }
    EMBSTORE_RETURN_NOT_OK(st);
    if (options.progress) options.progress(need, need);
    LoadStats stats;
    stats.rows = end - begin;
    stats.bytes = need;
    stats.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    stats.local = !parts.empty();
    for (const auto& p : parts) {
      stats.wire_bytes += p.stats.wire_bytes;
      stats.resumes += p.stats.resumes;
      stats.bad_chunks += p.stats.bad_chunks;
      stats.streams += p.stats.streams;
      stats.local = stats.local && p.stats.local;
    }
    return stats;
  }

  // A key's shard is not known from the key (shards split by rows), so the keys go to the
  // shards in turn: all of them to shard 0, then the ones it lacks to shard 1, and so on; a key
  // no shard holds is missing. Rows land in `out` in request order, as from any source.
  Result<KeyCopyResult> CopyKeys(std::span<const std::string> keys, std::span<std::byte> out,
                                 const ReadOptions& options) override {
    const std::uint64_t per_row = options.to_f32 ? desc_.dim * 4 : desc_.row_bytes;
    EMBSTORE_RETURN_NOT_OK(internal::CheckKeyLookup(desc_.name, desc_.has_keys, per_row,
                                                    keys.size(), out.size()));
    std::vector<std::uint32_t> pending(keys.size());  // indices into `keys` not found yet
    for (std::uint32_t i = 0; i < pending.size(); ++i) pending[i] = i;
    std::vector<std::string> asked;
    std::vector<std::byte> rows;
    for (int i = 0; i < shard_count() && !pending.empty(); ++i) {
      EMBSTORE_ASSIGN_OR_RETURN(RowSource * shard, Child(i, options, nullptr, std::nullopt));
      const bool all = pending.size() == keys.size();
      if (!all) {
        asked.clear();
        for (std::uint32_t k : pending) asked.push_back(keys[k]);
        rows.resize(asked.size() * per_row);
      }
      auto found = all ? shard->CopyKeys(keys, out, options)
                       : shard->CopyKeys(asked, std::span<std::byte>(rows), options);
      if (!found.ok()) {
        return Status(found.status().code(), ShardName(i) + ": " + found.status().message());
      }
      // found->missing indexes what was asked.
      std::vector<char> absent(pending.size(), 0);
      for (std::uint32_t j : found->missing) {
        if (j >= absent.size()) {
          return Status::Internal(ShardName(i) + ": lookup reported key index " +
                                  std::to_string(j) + " of " + std::to_string(absent.size()));
        }
        absent[j] = 1;
      }
      std::vector<std::uint32_t> still;
      for (std::uint32_t j = 0; j < pending.size(); ++j) {
        if (absent[j]) {
          still.push_back(pending[j]);
        } else if (!all) {
          std::memcpy(out.data() + std::uint64_t{pending[j]} * per_row,
                      rows.data() + std::uint64_t{j} * per_row, per_row);
        }
      }
      pending = std::move(still);
    }
    return KeyCopyResult{std::move(pending)};
  }

  // Keys of logical rows [begin, end), shard by shard.
  Result<std::vector<std::string>> Keys(std::uint64_t begin, std::uint64_t end) override {
    if (!desc_.has_keys) return Status::FailedPrecondition("table '" + desc_.name + "' has no keys");
    if (begin > end || end > desc_.rows) {
      return Status::OutOfRange("key rows " + Range(begin, end) + " are outside table '" +
                                desc_.name + "' of manifest '" + manifest_.origin + "'");
    }
    std::vector<std::string> keys;
    for (int i = 0; i < shard_count(); ++i) {
      const ShardSpec& s = manifest_.shards[i];
      const std::uint64_t b = std::max(begin, s.begin), e = std::min(end, s.end);
      if (b >= e) continue;
      EMBSTORE_ASSIGN_OR_RETURN(RowSource * child, Child(i, ReadOptions{}, nullptr, std::nullopt));
      auto part = child->Keys(b - s.begin, e - s.begin);
      if (!part.ok()) {
        return Status(part.status().code(), ShardName(i) + ": " + part.status().message());
      }
      for (auto& k : *part) keys.push_back(std::move(k));
    }
    return keys;
  }

 private:
  struct Slot {
    mutable std::mutex mu;  // held while the shard is opened, so it is opened once
    std::unique_ptr<RowSource> source;
  };

  int shard_count() const { return static_cast<int>(manifest_.shards.size()); }

  // "manifest 'm.json' shard 1 (table 't1' at host:port, rows [10, 20))".
  std::string ShardName(int i) const {
    const ShardSpec& s = manifest_.shards[i];
    return "manifest '" + manifest_.origin + "' shard " + std::to_string(i) + " (table '" +
           s.table + "' at " + s.target + ", rows " + Range(s.begin, s.end) + ")";
  }

  // Where shard `i` is, as OpenSource takes it: a relative path is relative to the manifest's
  // folder.
  std::string ShardLocation(int i) const {
    const std::string& t = manifest_.shards[i].target;
    if (ShardTargetIsPath(t) && !t.starts_with('/')) {
      return (std::filesystem::path(manifest_.origin).parent_path() / t).lexically_normal().string();
    }
    return t;
  }

  // FailedPrecondition unless `d` has the rows, dim, dtype (and content id) shard `i` promises.
  Status CheckShard(int i, const TableDesc& d) const {
    const ShardSpec& s = manifest_.shards[i];
    auto mismatch = [&](const std::string& what, const std::string& want, const std::string& got) {
      return Status::FailedPrecondition(ShardName(i) + ": the shard's table has " + what + " " +
                                        got + ", the manifest says " + want);
    };
    if (d.rows != s.end - s.begin) {
      return mismatch("rows", std::to_string(s.end - s.begin), std::to_string(d.rows));
    }
    if (d.dim != manifest_.dim) {
      return mismatch("dim", std::to_string(manifest_.dim), std::to_string(d.dim));
    }
    if (d.dtype != manifest_.dtype) {
      return mismatch("dtype", std::string(store::DTypeName(manifest_.dtype)),
                      std::string(store::DTypeName(d.dtype)));
    }
    if (s.content_id && d.content_id != *s.content_id) {
      return mismatch("content_id", FormatContentId(*s.content_id), FormatContentId(d.content_id));
    }
    return Status::OK();
  }

  // Shard `i` as a source of its own: opened the first time it is needed, checked against the
  // manifest, then kept (it pins the version it described). With `fan`, a shard on a server
  // that cannot be reached (or is not SERVING) is retried with the read's backoff for up to
  // max_attempts attempts, each retry posted as a kResume event whose `stream` is the shard;
  // without it, one attempt.
  Result<RowSource*> Child(int i, const ReadOptions& o, internal::FanOut* fan,
                           std::optional<Clock::time_point> deadline) {
    Slot& slot = *slots_[i];
    std::lock_guard<std::mutex> lock(slot.mu);
    if (slot.source != nullptr) return slot.source.get();
    const std::string location = ShardLocation(i);
    auto kind = ClassifyLocation(location);
    if (!kind.ok()) return Status(kind.status().code(), ShardName(i) + ": " + kind.status().message());
    if (*kind == LocationKind::kManifest) {
      return Status::InvalidArgument(ShardName(i) + ": a shard cannot be another manifest");
    }
    const bool server = *kind == LocationKind::kServer;
    const int attempts = fan != nullptr && server ? std::max(1, o.max_attempts) : 1;
    for (int attempt = 1;; ++attempt) {
      if (fan != nullptr && (fan->cancel().cancelled() || (o.cancel && o.cancel->cancelled()))) {
        return Status::Cancelled("read cancelled");
      }
      auto src = OpenOnce(i, location, server, deadline);
      if (src.ok()) {
        EMBSTORE_RETURN_NOT_OK(CheckShard(i, (*src)->desc()));
        slot.source = std::move(*src);
        return slot.source.get();
      }
      const StatusCode code = src.status().code();
      const bool transient =
          server && (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded);
      if (!transient || attempt >= attempts) {
        return Status(code, ShardName(i) + ": " + src.status().message() +
                                (transient && attempts > 1
                                     ? " (gave up after " + std::to_string(attempt) + " attempts)"
                                     : ""));
      }
      const auto backoff = internal::BackoffDelay(o, attempt);
      if (deadline && Clock::now() + backoff >= *deadline) {
        return Status::DeadlineExceeded(ShardName(i) +
                                        ": read timed out while the server was unreachable: " +
                                        src.status().message());
      }
      fan->Post({LoadEvent::Kind::kResume, i, manifest_.shards[i].begin,
                 ShardName(i) + " unreachable, retrying in " + std::to_string(backoff.count()) +
                     " ms: " + src.status().message()});
      fan->SleepUntil(Clock::now() + backoff);
    }
  }

  // One attempt at opening shard `i`. A server is asked for its health first, over a connection
  // of its own: a server that was down a moment ago is seen as soon as it listens, where a shared
  // connection would sit out gRPC's reconnect backoff (1 s, growing) after every refused attempt.
  Result<std::unique_ptr<RowSource>> OpenOnce(int i, const std::string& location, bool server,
                                              std::optional<Clock::time_point> deadline) {
    SourceOptions so = options_;
    so.table = manifest_.shards[i].table;
    if (server) {
      ConnectOptions probe = so.connect;
      probe.target = location;
      auto health = CheckHealth(probe);
      if (health.ok() && *health != ServingStatus::kServing) {
        return Status::Unavailable("server '" + location + "' reports " +
                                   std::string(ServingStatusName(*health)));
      }
      if (!health.ok() && (health.status().code() == StatusCode::kUnavailable ||
                           health.status().code() == StatusCode::kDeadlineExceeded)) {
        return health.status();
      }
      // Serving, or a server without health: ask it directly.
      if (deadline) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
        if (left.count() <= 0) return Status::DeadlineExceeded("read timed out");
        if (so.open_timeout.count() <= 0 || left < so.open_timeout) so.open_timeout = left;
      }
    }
    return OpenSource(location, so);
  }

  ShardManifest manifest_;
  SourceOptions options_;                    // connect and allow_local for every shard
  std::vector<std::unique_ptr<Slot>> slots_;  // one a shard
};

}  // namespace

Result<std::unique_ptr<RowSource>> OpenShardedSource(const std::string& manifest_path,
                                                     const SourceOptions& options) {
  EMBSTORE_ASSIGN_OR_RETURN(auto manifest, ReadShardManifest(manifest_path));
  auto src = std::make_unique<ShardedSource>(std::move(manifest), options);
  if (options.describe_shards) EMBSTORE_RETURN_NOT_OK(src->OpenAll());
  return std::unique_ptr<RowSource>(std::move(src));
}

}  // namespace embstore::client
