#include "embstore/client/sharded.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "embstore/client/open_source.h"
#include "embstore/common/read_file.h"

namespace embstore::client {
namespace {

using json = nlohmann::json;

constexpr std::string_view kFormat = "embstore-shards/1";

std::string Range(std::uint64_t b, std::uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
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

}  // namespace

bool ShardTargetIsPath(std::string_view t) {
  return !t.starts_with("s3://") && !IsServerTarget(t) && t.find('/') != std::string_view::npos;
}

bool ValidShardTarget(std::string_view t) {
  if (t.starts_with("s3://")) return t.size() > 5;
  return (IsServerTarget(t) && t.front() != ':' && t.back() != ':') || ShardTargetIsPath(t);
}

std::string FormatContentId(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

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
        !ValidShardTarget(s["target"].get<std::string>())) {
      return bad(where +
                 ": \"target\" must be a server (\"host:port\", \"unix:PATH\"), an s3:// "
                 "address or a local path with a '/' (\"./NAME.emb\" is next to the manifest)" +
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
    if (s.content_id) j["content_id"] = FormatContentId(*s.content_id);
    doc["shards"].push_back(std::move(j));
  }
  return doc.dump(2) + "\n";
}

}  // namespace embstore::client
