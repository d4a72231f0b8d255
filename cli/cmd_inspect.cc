// `embstore inspect LOCATION [--table NAME] [--json]`: what a table holds, without reading its
// rows. LOCATION is anything client::OpenSource takes: a file (or an s3:// object, of which only
// the header, checksums and keys are fetched) shows everything its header says; a server or a
// manifest shows the table's description.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client_flags.h"
#include "command.h"
#include "embstore/client/row_source.h"
#include "embstore/store/table.h"

namespace embstore::cli {
namespace {

struct InspectArgs {
  ClientFlags client;
  std::string location;
  std::string table;
  bool json = false;
  int keys = 5;
};

int Inspect(const InspectArgs& a) {
  auto opened = OpenTable(a.location, a.table, a.client);
  if (!opened.ok()) return ReportError("inspect", opened.status());
  client::RowSource& src = **opened;
  const client::TableDesc& d = src.desc();
  const store::Table* t = src.local_table();  // null for a server's or a manifest's table
  const std::uint64_t nkeys = d.has_keys ? std::min<std::uint64_t>(a.keys, d.rows) : 0;
  std::vector<std::string> keys;
  if (t != nullptr) {
    for (std::uint64_t r = 0; r < nkeys; ++r) keys.emplace_back(t->Key(r));
  } else if (nkeys > 0) {
    auto got = src.Keys(0, nkeys);
    if (!got.ok()) return ReportError("inspect", got.status());
    keys = std::move(got).value();
  }
  // The whole header of a file; the user metadata a server describes.
  const std::map<std::string, std::string>& metadata = t != nullptr ? t->metadata() : d.metadata;
  if (a.json) {
    nlohmann::ordered_json j;
    j["file"] = a.location;
    if (t == nullptr) j["table"] = d.name;
    j["format_version"] = d.format_version;
    j["rows"] = d.rows;
    j["dim"] = d.dim;
    j["dtype"] = std::string(store::DTypeName(d.dtype));
    if (t != nullptr) {
      j["file_bytes"] = t->file_size();
      j["data_offset"] = t->data_offset();
    }
    j["matrix_bytes"] = d.rows * d.row_bytes;
    j["block_rows"] = d.block_rows;
    j["blocks"] = t != nullptr ? t->num_blocks() : d.num_blocks;
    j["has_keys"] = d.has_keys;
    j["key_bytes"] = d.key_bytes;
    j["metadata"] = metadata;
    j["first_keys"] = keys;
    // Keys are validated UTF-8 by the converter; replace anything else rather than fail.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  std::printf("file:         %s\n", a.location.c_str());
  if (t == nullptr) std::printf("table:        %s (%s)\n", d.name.c_str(), std::string(src.kind()).c_str());
  std::printf("shape:        %llu x %llu\n", static_cast<unsigned long long>(d.rows),
              static_cast<unsigned long long>(d.dim));
  std::printf("dtype:        %s\n", std::string(store::DTypeName(d.dtype)).c_str());
  if (t != nullptr) {
    std::printf("matrix:       %llu bytes at offset %llu\n",
                static_cast<unsigned long long>(d.rows * d.row_bytes),
                static_cast<unsigned long long>(t->data_offset()));
  } else {
    std::printf("matrix:       %llu bytes\n", static_cast<unsigned long long>(d.rows * d.row_bytes));
  }
  if (d.block_rows > 0) {
    std::printf("checksums:    %llu blocks of %llu rows (xxh3-64)\n",
                static_cast<unsigned long long>(t != nullptr ? t->num_blocks() : d.num_blocks),
                static_cast<unsigned long long>(d.block_rows));
  }
  std::printf("keys:         %s\n", d.has_keys ? "yes" : "no");
  for (std::size_t r = 0; r < keys.size(); ++r) {
    std::printf("  [%zu] %.*s\n", r, static_cast<int>(keys[r].size()), keys[r].data());
  }
  std::printf("metadata:\n");
  for (const auto& [k, v] : metadata) std::printf("  %s = %s\n", k.c_str(), v.c_str());
  return kExitOk;
}

}  // namespace

RunFn RegisterInspect(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* sub =
      app.add_subcommand("inspect", "Show a table's shape, dtype, metadata and keys");
  sub->add_option("LOCATION", args->location,
                  "A table file (.emb), s3://BUCKET/KEY.emb, a shard manifest (.json); or a store "
                  "directory, s3://BUCKET/PREFIX or a server (host:port, unix:PATH) with --table")
      ->required();
  sub->add_option("--table", args->table, "Table name, for a LOCATION that holds several tables");
  sub->add_flag("--json", args->json, "Print one JSON object instead of text");
  sub->add_option("--keys", args->keys, "How many keys to show (default 5)")
      ->check(kNonNegativeNumber);
  AddConnectFlags(sub, &args->client);
  return [args]() { return Inspect(*args); };
}

}  // namespace embstore::cli
