// `embstore inspect FILE [--json]`: what a table file holds, without reading its data.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "embstore/store/table.h"
#include "object_paths.h"

namespace embstore::cli {

RunFn RegisterInspect(CLI::App& app) {
  struct Args {
    std::string file;
    bool json = false;
    int keys = 5;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub =
      app.add_subcommand("inspect", "Show a table file's shape, dtype, metadata and keys");
  sub->add_option("FILE", args->file, "Table file (.emb), or s3://BUCKET/KEY")->required();
  sub->add_flag("--json", args->json, "Print one JSON object instead of text");
  sub->add_option("--keys", args->keys, "How many keys to show (default 5)")
      ->check(CLI::NonNegativeNumber);
  return [args]() {
    auto local = LocalTable::Fetch(args->file, "inspect", /*verify=*/false);
    if (!local.ok()) return ReportError("inspect", local.status());
    auto table = store::Table::Open((*local)->path());
    if (!table.ok()) return ReportError("inspect", (*local)->Named(table.status()));
    (*local)->Unlink();
    const store::Table& t = **table;
    std::uint64_t nkeys = t.has_keys() ? std::min<std::uint64_t>(args->keys, t.rows()) : 0;
    if (args->json) {
      nlohmann::ordered_json j;
      j["file"] = args->file;
      j["format_version"] = t.format_version();
      j["rows"] = t.rows();
      j["dim"] = t.dim();
      j["dtype"] = std::string(store::DTypeName(t.dtype()));
      j["file_bytes"] = t.file_size();
      j["data_offset"] = t.data_offset();
      j["matrix_bytes"] = t.rows() * t.row_bytes();
      j["block_rows"] = t.block_rows();
      j["blocks"] = t.num_blocks();
      j["has_keys"] = t.has_keys();
      j["key_bytes"] = t.key_bytes();
      j["metadata"] = t.metadata();
      nlohmann::ordered_json sample = nlohmann::ordered_json::array();
      for (std::uint64_t r = 0; r < nkeys; ++r) sample.push_back(std::string(t.Key(r)));
      j["first_keys"] = std::move(sample);
      // Keys are validated UTF-8 by the converter; replace anything else rather than fail.
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      return kExitOk;
    }
    std::printf("file:         %s\n", args->file.c_str());
    std::printf("shape:        %llu x %llu\n", static_cast<unsigned long long>(t.rows()),
                static_cast<unsigned long long>(t.dim()));
    std::printf("dtype:        %s\n", std::string(store::DTypeName(t.dtype())).c_str());
    std::printf("matrix:       %llu bytes at offset %llu\n",
                static_cast<unsigned long long>(t.rows() * t.row_bytes()),
                static_cast<unsigned long long>(t.data_offset()));
    std::printf("checksums:    %llu blocks of %llu rows (xxh3-64)\n",
                static_cast<unsigned long long>(t.num_blocks()),
                static_cast<unsigned long long>(t.block_rows()));
    std::printf("keys:         %s\n", t.has_keys() ? "yes" : "no");
    for (std::uint64_t r = 0; r < nkeys; ++r) {
      std::printf("  [%llu] %.*s\n", static_cast<unsigned long long>(r),
                  static_cast<int>(t.Key(r).size()), t.Key(r).data());
    }
    std::printf("metadata:\n");
    for (const auto& [k, v] : t.metadata()) std::printf("  %s = %s\n", k.c_str(), v.c_str());
    return kExitOk;
  };
}

}  // namespace embstore::cli
