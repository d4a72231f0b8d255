// `embstore ls --from TARGET [--json]`: the tables a server offers.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client_flags.h"
#include "command.h"

namespace embstore::cli {

RunFn RegisterLs(CLI::App& app) {
  struct Args {
    ClientFlags client;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("ls", "List the tables a server offers, with shape and dtype");
  AddClientFlags(sub, &args->client);
  sub->add_flag("--json", args->json, "Print a JSON array instead of a table");
  return [args]() {
    auto opts = ToConnectOptions(args->client);
    if (!opts.ok()) return ReportError("ls", opts.status());
    auto c = client::Client::Connect(*opts);
    if (!c.ok()) return ReportError("ls", c.status());
    auto tables = (*c)->ListTables();
    if (!tables.ok()) return ReportError("ls", tables.status());
    if (args->json) {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const auto& t : *tables) {
        out.push_back({{"name", t.name},
                       {"rows", t.rows},
                       {"dim", t.dim},
                       {"dtype", std::string(store::DTypeName(t.dtype))},
                       {"bytes", t.rows * t.row_bytes},
                       {"has_keys", t.has_keys},
                       {"content_id", t.content_id},
                       {"generation", t.generation}});
      }
      std::cout << out.dump(2) << "\n";
      return kExitOk;
    }
    std::printf("%-32s %12s %8s %6s %5s %12s\n", "NAME", "ROWS", "DIM", "DTYPE", "KEYS", "BYTES");
    for (const auto& t : *tables) {
      std::printf("%-32s %12llu %8llu %6s %5s %12llu\n", t.name.c_str(),
                  static_cast<unsigned long long>(t.rows), static_cast<unsigned long long>(t.dim),
                  std::string(store::DTypeName(t.dtype)).c_str(), t.has_keys ? "yes" : "no",
                  static_cast<unsigned long long>(t.rows * t.row_bytes));
    }
    return kExitOk;
  };
}

}  // namespace embstore::cli
