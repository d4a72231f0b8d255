#include "embstore/client/sharded.h"

#include "fan_out.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "embstore/client/health.h"
#include "embstore/common/read_file.h"

namespace embstore::client {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr std::string_view kFormat = "embstore-shards/1";

std::string Range(std::uint64_t b, std::uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

bool ValidTarget(const std::string& t) {
  if (t.rfind("unix:", 0) == 0) return t.size() > 5;
  return t.find(':') != std::string::npos && t.front() != ':' && t.back() != ':';
}

// Reads a u64 field given as a JSON number or a string ("0x..." hex or decimal).
bool ReadU64(const json& v, std::uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<std::uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    auto i = v.get<std::int64_t>();
    if (i < 0) return false;
    *out = static_cast<std::uint64_t>(i);
    return true;
  }
  if (!v.is_string()) return false;
  std::string s = v.get<std::string>();
  int base = 10;
  std::string_view digits = s;
  if (digits.rfind("0x", 0) == 0 || digits.rfind("0X", 0) == 0) {
    base = 16;
    digits.remove_prefix(2);
  }
  if (digits.empty()) return false;
  auto r = std::from_chars(digits.data(), digits.data() + digits.size(), *out, base);
  return r.ec == std::errc() && r.ptr == digits.data() + digits.size();
}

std::string Hex(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

Result<ShardManifest> ParseShardManifest(std::string_view text, const std::string& origin) {
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("manifest '" + origin + "': " + what);
  };
  json doc;
  try {
    doc = json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/true,
                      /*ignore_comments=*/true);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for huge numbers
    return bad(std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) return bad("the top level must be a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "format" && key != "table" && key != "rows" && key != "dim" && key != "dtype" &&
        key != "shards") {
      return bad("unknown key '" + key + "' (expected format, table, rows, dim, dtype, shards)");
    }
  }
  ShardManifest m;
  m.origin = origin;
  if (!doc.contains("format") || !doc["format"].is_string() ||
      doc["format"].get<std::string>() != kFormat) {
    return bad("\"format\" must be \"" + std::string(kFormat) + "\"" +
               (doc.contains("format") ? ", found " + doc["format"].dump() : ", it is missing"));
  }
  if (!doc.contains("table") || !doc["table"].is_string() ||
      doc["table"].get<std::string>().empty()) {
    return bad("\"table\" must be a non-empty string naming the logical table");
  }
  m.table = doc["table"].get<std::string>();
  if (!doc.contains("rows") || !ReadU64(doc["rows"], &m.rows)) {
    return bad("\"rows\" must be a non-negative integer");
  }
  if (!doc.contains("dim") || !ReadU64(doc["dim"], &m.dim) || m.dim == 0) {
    return bad("\"dim\" must be a positive integer");
  }
  if (!doc.contains("dtype") || !doc["dtype"].is_string()) {
    return bad("\"dtype\" must be one of \"F32\", \"F16\", \"BF16\"");
  }
  auto dtype = store::ParseDType(doc["dtype"].get<std::string>());
  if (!dtype) {
    return bad("\"dtype\" must be one of \"F32\", \"F16\", \"BF16\", found " + doc["dtype"].dump());
  }
  m.dtype = *dtype;
  if (!doc.contains("shards") || !doc["shards"].is_array()) {
    return bad("\"shards\" must be an array of shard objects");
  }
  std::uint64_t next = 0;
  const json& shards = doc["shards"];
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const json& s = shards[i];
    const std::string where = "shard " + std::to_string(i);
    if (!s.is_object()) return bad(where + " is not a JSON object");
    for (const auto& [key, value] : s.items()) {
      if (key != "begin" && key != "end" && key != "target" && key != "table" &&
          key != "content_id") {
        return bad(where + ": unknown key '" + key +
                   "' (expected begin, end, target, table, content_id)");
      }
    }
    ShardSpec spec;
    if (!s.contains("begin") || !ReadU64(s["begin"], &spec.begin)) {
      return bad(where + ": \"begin\" must be a non-negative integer");
    }
    if (!s.contains("end") || !ReadU64(s["end"], &spec.end)) {
      return bad(where + ": \"end\" must be a non-negative integer");
    }
    if (!s.contains("target") || !s["target"].is_string() ||
        !ValidTarget(s["target"].get<std::string>())) {
      return bad(where + ": \"target\" must be \"host:port\" or \"unix:PATH\"" +
                 (s.contains("target") ? ", found " + s["target"].dump() : ""));
    }
    spec.target = s["target"].get<std::string>();
    if (!s.contains("table") || !s["table"].is_string() || s["table"].get<std::string>().empty()) {
      return bad(where + ": \"table\" must be the non-empty name of the table on its server");
    }
    spec.table = s["table"].get<std::string>();
    if (s.contains("content_id")) {
      std::uint64_t id = 0;
      if (!ReadU64(s["content_id"], &id)) {
        return bad(where + ": \"content_id\" must be an integer or a \"0x...\" hex string");
      }
      spec.content_id = id;
    }
    if (spec.begin >= spec.end) {
      return bad(where + ": rows " + Range(spec.begin, spec.end) +
                 " are empty or reversed (begin must be < end)");
    }
    if (spec.begin != next) {
      return bad(where + ": begins at row " + std::to_string(spec.begin) + " but " +
                 (i == 0
                      ? std::string("the first shard must begin at row 0")
                      : "shard " + std::to_string(i - 1) + " ends at row " + std::to_string(next)) +
                 " (shards must be listed in row order, without gaps or overlaps)");
    }
    next = spec.end;
    m.shards.push_back(std::move(spec));
  }
  if (next != m.rows) {
    return bad("the shards cover rows " + Range(0, next) + " but the table has " +
               std::to_string(m.rows) + " rows");
  }
  return m;
}

Result<ShardManifest> ReadShardManifest(const std::string& path) {
  EMBSTORE_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, "shard manifest"));
  return ParseShardManifest(text, path);
}

std::string FormatShardManifest(const ShardManifest& m) {
  nlohmann::ordered_json doc;
  doc["format"] = kFormat;
  doc["table"] = m.table;
  doc["rows"] = m.rows;
  doc["dim"] = m.dim;
  doc["dtype"] = std::string(store::DTypeName(m.dtype));
  doc["shards"] = nlohmann::ordered_json::array();
  for (const auto& s : m.shards) {
    nlohmann::ordered_json j;
    j["begin"] = s.begin;
    j["end"] = s.end;
    j["target"] = s.target;
    j["table"] = s.table;
    if (s.content_id) j["content_id"] = Hex(*s.content_id);
    doc["shards"].push_back(std::move(j));
  }
  return doc.dump(2) + "\n";
}

Result<std::unique_ptr<ShardedTable>> ShardedTable::Open(ShardManifest manifest,
                                                         const ConnectOptions& connect) {
  std::vector<std::unique_ptr<Client>> clients;
  for (std::size_t i = 0; i < manifest.shards.size(); ++i) {
    ConnectOptions o = connect;
    o.target = manifest.shards[i].target;
    auto c = Client::Connect(o);
    if (!c.ok()) {
      return Status(c.status().code(), "manifest '" + manifest.origin + "' shard " +
                                           std::to_string(i) + ": " + c.status().message());
    }
    clients.push_back(std::move(*c));
  }
  return std::unique_ptr<ShardedTable>(
      new ShardedTable(std::move(manifest), connect, std::move(clients)));
}

std::string ShardedTable::ShardName(int i) const {
  const ShardSpec& s = manifest_.shards[i];
  return "manifest '" + manifest_.origin + "' shard " + std::to_string(i) + " (table '" + s.table +
         "' at " + s.target + ", rows " + Range(s.begin, s.end) + ")";
}

ConnectOptions ShardedTable::ShardConnect(int i) const {
  ConnectOptions c = connect_;
  c.target = manifest_.shards[i].target;
  return c;
}

Status ShardedTable::CheckShard(int i, const TableDesc& d) const {
  const ShardSpec& s = manifest_.shards[i];
  auto mismatch = [&](const std::string& what, const std::string& want, const std::string& got) {
    return Status::FailedPrecondition(ShardName(i) + ": the server's table has " + what + " " +
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
    return mismatch("content_id", Hex(*s.content_id), Hex(d.content_id));
  }
  return Status::OK();
}

Result<std::uint64_t> ShardedTable::OutputBytes(const LoadOptions& options) const {
  const std::uint64_t end = options.end_row.value_or(manifest_.rows);
  if (options.begin_row > end || end > manifest_.rows) {
    return Status::OutOfRange("rows " + Range(options.begin_row, end) + " are outside table '" +
                              manifest_.table + "' of manifest '" + manifest_.origin + "' (" +
                              std::to_string(manifest_.rows) + " rows)");
  }
  const std::uint64_t elem = options.to_f32 ? 4 : store::DTypeSize(manifest_.dtype);
  return (end - options.begin_row) * manifest_.dim * elem;
}

Result<std::vector<TableDesc>> ShardedTable::DescribeShards() {
  std::vector<TableDesc> out;
  for (std::size_t i = 0; i < manifest_.shards.size(); ++i) {
    auto d = clients_[i]->Describe(manifest_.shards[i].table);
    if (!d.ok()) {
      return Status(d.status().code(),
                    ShardName(static_cast<int>(i)) + ": " + d.status().message());
    }
    EMBSTORE_RETURN_NOT_OK(CheckShard(static_cast<int>(i), *d));
    out.push_back(std::move(*d));
  }
  return out;
}

Result<std::vector<std::string>> ShardedTable::Keys(std::uint64_t begin,
                                                    std::optional<std::uint64_t> end_opt) {
  const std::uint64_t end = end_opt.value_or(manifest_.rows);
  if (begin > end || end > manifest_.rows) {
    return Status::OutOfRange("key rows " + Range(begin, end) + " are outside table '" +
                              manifest_.table + "' of manifest '" + manifest_.origin + "'");
  }
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < manifest_.shards.size(); ++i) {
    const ShardSpec& s = manifest_.shards[i];
    const std::uint64_t b = std::max(begin, s.begin), e = std::min(end, s.end);
    if (b >= e) continue;
    auto part = clients_[i]->Keys(s.table, b - s.begin, e - s.begin);
    if (!part.ok()) {
      return Status(part.status().code(),
                    ShardName(static_cast<int>(i)) + ": " + part.status().message());
    }
    for (auto& k : *part) keys.push_back(std::move(k));
  }
  return keys;
}


Result<ShardedLoadStats> ShardedTable::Load(std::span<std::byte> out, const LoadOptions& options) {
  EMBSTORE_ASSIGN_OR_RETURN(std::uint64_t need, OutputBytes(options));
  if (out.size() != need) {
    return Status::InvalidArgument("buffer for table '" + manifest_.table + "' of manifest '" +
                                   manifest_.origin + "' holds " + std::to_string(out.size()) +
                                   " bytes, the load needs " + std::to_string(need));
  }
  const auto start = Clock::now();
  const std::uint64_t begin = options.begin_row;
  const std::uint64_t end = options.end_row.value_or(manifest_.rows);
  const std::uint64_t out_row_bytes =
      manifest_.dim * (options.to_f32 ? 4 : store::DTypeSize(manifest_.dtype));
  const std::optional<Clock::time_point> deadline =
      options.timeout.count() > 0 ? std::optional(start + options.timeout) : std::nullopt;

  ShardedLoadStats result;
  for (std::size_t i = 0; i < manifest_.shards.size(); ++i) {
    const ShardSpec& s = manifest_.shards[i];
    const std::uint64_t b = std::max(begin, s.begin), e = std::min(end, s.end);
    if (b < e) result.shards.push_back({static_cast<int>(i), b, e, {}});
  }
  internal::FanOut fan;  // one worker a shard; its cancel token stops every shard's load
  std::vector<std::atomic<std::uint64_t>> done(result.shards.size());
  std::atomic<int> unreachable{0};

  // One shard: wait for its server (Describe, retried while it is unreachable), check it against
  // the manifest, then load its part of the range into place.
  auto run_shard = [&](std::size_t slot) -> Status {
    ShardLoadStats& r = result.shards[slot];
    const ShardSpec& s = manifest_.shards[r.shard];
    Client& c = *clients_[r.shard];
    auto cancelled = [&] {
      return fan.cancel().cancelled() || (options.cancel && options.cancel->cancelled());
    };
    for (int attempt = 1;; ++attempt) {
      const auto backoff = internal::BackoffDelay(options, attempt);
      if (cancelled()) return Status::Cancelled("load cancelled");
      // Health first, over a connection of its own: a server that was down a moment ago is seen
      // as soon as it listens. The Client's shared connection would sit out gRPC's reconnect
      // backoff (1 s, growing) after every refused attempt, and miss it for seconds.
      ConnectOptions probe = ShardConnect(r.shard);
      Result<TableDesc> d = Status::Unavailable("");
      auto health = CheckHealth(probe);
      if (health.ok() && *health != ServingStatus::kServing) {
        d = Status::Unavailable("server '" + s.target + "' reports " +
                                std::string(ServingStatusName(*health)));
      } else if (!health.ok() && (health.status().code() == StatusCode::kUnavailable ||
                                  health.status().code() == StatusCode::kDeadlineExceeded)) {
        d = health.status();
      } else {
        d = c.Describe(s.table);  // serving, or a server without health: ask it directly
      }
      if (d.ok()) {
        EMBSTORE_RETURN_NOT_OK(CheckShard(r.shard, *d));
        break;
      }
      const StatusCode code = d.status().code();
      const bool transient =
          code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded;
      if (!transient || attempt >= std::max(1, options.max_attempts)) {
        return Status(
            code,
            ShardName(r.shard) + ": " + d.status().message() +
                (transient ? " (gave up after " + std::to_string(attempt) + " attempts)" : ""));
      }
      if (deadline && Clock::now() + backoff >= *deadline) {
        return Status::DeadlineExceeded(ShardName(r.shard) +
                                        ": load timed out while the server "
                                        "was unreachable: " +
                                        d.status().message());
      }
      ++unreachable;
      fan.Post({LoadEvent::Kind::kResume, r.shard, r.begin,
                ShardName(r.shard) + " unreachable, retrying in " +
                    std::to_string(backoff.count()) + " ms: " + d.status().message()});
      // The caller's cancel reaches the fan-out through the calling thread's poll.
      fan.SleepUntil(Clock::now() + backoff);
    }

    LoadOptions o = options;
    o.begin_row = r.begin - s.begin;
    o.end_row = r.end - s.begin;
    o.cancel = &fan.cancel();
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      if (left.count() <= 0) {
        return Status::DeadlineExceeded(ShardName(r.shard) + ": load timed out");
      }
      o.timeout = left;
    }
    o.progress = [&done, slot, &cancelled](std::uint64_t bytes, std::uint64_t) {
      done[slot].store(bytes, std::memory_order_relaxed);
      return !cancelled();
    };
    o.on_event = [&fan, &r, this](const LoadEvent& e) {
      LoadEvent ev = e;
      ev.stream = r.shard;
      ev.message = ShardName(r.shard) + " stream " + std::to_string(e.stream) + ": " + e.message;
      fan.Post(std::move(ev));
    };
    if (options.after_chunk) {
      o.after_chunk = [&options, &r, &s](int, std::uint64_t first_row) {
        options.after_chunk(r.shard, first_row + s.begin);
      };
    }
    auto part = out.subspan((r.begin - begin) * out_row_bytes, (r.end - r.begin) * out_row_bytes);
    auto stats = c.Load(s.table, part, o);
    if (!stats.ok()) {
      return Status(stats.status().code(), ShardName(r.shard) + ": " + stats.status().message());
    }
    if (s.content_id && stats->content_id != *s.content_id) {
      return Status::FailedPrecondition(
          ShardName(r.shard) +
          ": the server's table changed to "
          "content_id " +
          Hex(stats->content_id) + " during the load, the manifest pins " + Hex(*s.content_id));
    }
    r.stats = *stats;
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
    st = fan.Run(static_cast<int>(result.shards.size()),
                 [&](int slot) { return run_shard(static_cast<std::size_t>(slot)); },
                 options.on_event, [&]() -> Status {
                   if ((options.cancel && options.cancel->cancelled()) ||
                       (options.progress && !options.progress(total_done(), need))) {
                     user_cancelled = true;
                     return Status::Cancelled("load cancelled");
                   }
                   return Status::OK();
                 });
  }
  if (user_cancelled || (options.cancel && options.cancel->cancelled())) {
    return Status::Cancelled("load of table '" + manifest_.table + "' of manifest '" +
                             manifest_.origin + "' cancelled");
  }
  EMBSTORE_RETURN_NOT_OK(st);
  if (options.progress) options.progress(need, need);
  result.rows = end - begin;
  result.bytes = need;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.unreachable_retries = unreachable.load();
  for (const auto& r : result.shards) {
    result.wire_bytes += r.stats.wire_bytes;
    result.resumes += r.stats.resumes;
    result.bad_chunks += r.stats.bad_chunks;
  }
  return result;
}

}  // namespace embstore::client
