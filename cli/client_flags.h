// Connection flags shared by the subcommands that talk to a server (pull, ls).
#ifndef EMBSTORE_CLI_CLIENT_FLAGS_H_
#define EMBSTORE_CLI_CLIENT_FLAGS_H_

#include <CLI/CLI.hpp>
#include <string>

#include "embstore/client/client.h"

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

void AddClientFlags(CLI::App* sub, ClientFlags* flags);

// The flags as ConnectOptions; InvalidArgument naming the flag when they do not fit together
// or a file cannot be read.
Result<client::ConnectOptions> ToConnectOptions(const ClientFlags& flags);

}  // namespace embstore::cli

#endif  // EMBSTORE_CLI_CLIENT_FLAGS_H_
