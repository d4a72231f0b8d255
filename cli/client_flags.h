// Connection flags shared by the subcommands that talk to a server (pull, ls, health), and the
// opening of a table location (pull, export, inspect, verify: client::OpenSource).
#ifndef EMBSTORE_CLI_CLIENT_FLAGS_H_
#define EMBSTORE_CLI_CLIENT_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "embstore/client/client.h"
#include "embstore/client/open_source.h"

namespace embstore::cli {

struct ClientFlags {
  std::string target;
  std::string token;
  std::string token_file;
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  double rpc_timeout_s = 30;
  std::string load_balancing;
};

// --from (required) and the connection flags.
void AddClientFlags(CLI::App* sub, ClientFlags* flags);
// The connection flags only (--token, --token-file, --tls*, --lb, --rpc-timeout).
void AddConnectFlags(CLI::App* sub, ClientFlags* flags);

// The flags as ConnectOptions; InvalidArgument naming the flag when they do not fit together
// or a file cannot be read.
Result<client::ConnectOptions> ToConnectOptions(const ClientFlags& flags);

// The table at `location` (anything client::OpenSource takes) named `table` (--table), with
// the connection flags for a server or a manifest's servers. A location of several tables
// without --table is an InvalidArgument that says to add it.
Result<std::unique_ptr<client::RowSource>> OpenTable(const std::string& location,
                                                     const std::string& table,
                                                     const ClientFlags& flags,
                                                     client::SourceOptions options = {});

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_CLIENT_FLAGS_H_
