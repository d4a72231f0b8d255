#include "header.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace embstore::store {

using ordered_json = nlohmann::ordered_json;

Result<std::string> SerializeHeader(const HeaderContent& header) {
  ordered_json j = ordered_json::object();
  ordered_json meta = ordered_json::object();
  for (const auto& [k, v] : header.metadata) meta[k] = v;
  j["__metadata__"] = std::move(meta);
  for (const auto& t : header.tensors) {
    ordered_json e = ordered_json::object();
    e["dtype"] = t.dtype;
    e["shape"] = t.shape;
    e["data_offsets"] = {t.begin, t.end};
    j[t.name] = std::move(e);
  }
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("metadata is not valid UTF-8: ") + e.what());
  }
}

namespace {

Status Bad(const std::string& file, const std::string& what) {
  return Status::Corruption("'" + file + "': bad header: " + what);
}

Result<std::uint64_t> ToU64(const nlohmann::json& v, const std::string& file,
                            const std::string& what) {
  if (!v.is_number_unsigned()) {
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return v.get<std::uint64_t>();
    return Bad(file, what + " must be a non-negative integer, found " + v.dump());
  }
  return v.get<std::uint64_t>();
}

// `text` with every byte outside printable ASCII written as \xNN, so that a message quoting
// hostile header bytes is itself valid, printable UTF-8.
std::string Printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// The deepest nesting of arrays and objects in `json` (strings skipped), stopping early once it
// passes `limit`.
int NestingDepth(std::string_view json, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Result<HeaderContent> ParseHeader(std::string_view json, const std::string& file) {
  // A table header nests three levels deep; refuse deep nesting before the JSON library sees it.
  constexpr int kMaxDepth = 16;
  if (NestingDepth(json, kMaxDepth) > kMaxDepth) {
    return Bad(file, "the JSON header nests deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range (1E2006)
    return Bad(file, "JSON does not parse: " + Printable(e.what()));
  }
  if (!j.is_object()) return Bad(file, "the JSON header is not an object");
  HeaderContent out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return Bad(file, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) {
          return Bad(file, "__metadata__ value of '" + m.key() + "' is not a string");
        }
        out.metadata.emplace_back(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    if (!v.is_object()) return Bad(file, "tensor '" + name + "' is not an object");
    TensorEntry t;
    t.name = name;
    auto dt = v.find("dtype");
    auto shape = v.find("shape");
    auto offs = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return Bad(file, "tensor '" + name + "' has no dtype");
    t.dtype = dt->get<std::string>();
    if (shape == v.end() || !shape->is_array()) {
      return Bad(file, "tensor '" + name + "' has no shape array");
    }
    for (const auto& d : *shape) {
      EMBSTORE_ASSIGN_OR_RETURN(std::uint64_t n, ToU64(d, file, "shape of '" + name + "'"));
      t.shape.push_back(n);
    }
    if (offs == v.end() || !offs->is_array() || offs->size() != 2) {
      return Bad(file, "tensor '" + name + "' has no [begin, end] data_offsets");
    }
    EMBSTORE_ASSIGN_OR_RETURN(t.begin, ToU64((*offs)[0], file, "data_offsets of '" + name + "'"));
    EMBSTORE_ASSIGN_OR_RETURN(t.end, ToU64((*offs)[1], file, "data_offsets of '" + name + "'"));
    if (t.end < t.begin) {
      return Bad(file, "tensor '" + name + "' ends (" + std::to_string(t.end) +
                           ") before it begins (" + std::to_string(t.begin) + ")");
    }
    out.tensors.push_back(std::move(t));
  }
  std::stable_sort(out.tensors.begin(), out.tensors.end(),
                   [](const TensorEntry& a, const TensorEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  return out;
}

}  // namespace embstore::store
