#include "client_flags.h"

#include <sstream>

#include "command.h"
#include "embstore/common/read_file.h"

namespace embstore::cli {

void AddClientFlags(CLI::App* sub, ClientFlags* f) {
  sub->add_option("--from", f->target, "Server: host:port or unix:PATH")->required();
  AddConnectFlags(sub, f);
}

void AddConnectFlags(CLI::App* sub, ClientFlags* f) {
  sub->add_option("--token", f->token, "Bearer token (visible in ps; prefer --token-file)");
  sub->add_option("--token-file", f->token_file, "File holding the bearer token")
      ->check(CLI::ExistingFile);
  sub->add_flag("--tls", f->tls, "Connect with TLS (implied by the other --tls-* flags)");
  sub->add_option("--tls-ca", f->tls_ca, "PEM CA bundle to trust instead of the system's")
      ->check(CLI::ExistingFile);
  sub->add_option("--tls-cert", f->tls_cert, "PEM client certificate")->check(CLI::ExistingFile);
  sub->add_option("--tls-key", f->tls_key, "PEM client key")->check(CLI::ExistingFile);
  sub->add_option("--tls-server-name", f->tls_server_name,
                  "Name to check the server certificate against");
  sub->add_option("--lb", f->load_balancing,
                  "Load balancing over the addresses a dns:/// target resolves to: pick_first "
                  "(default) or round_robin")
      ->check(CLI::IsMember({"pick_first", "round_robin"}));
  sub->add_option("--rpc-timeout", f->rpc_timeout_s, "Seconds for each short request (default 30)")
      ->check(kPositiveNumber);
}

Result<client::ConnectOptions> ToConnectOptions(const ClientFlags& f) {
  client::ConnectOptions o;
  o.target = f.target;
  if (!f.token.empty() && !f.token_file.empty()) {
    return Status::InvalidArgument("give either --token or --token-file, not both");
  }
  o.token = f.token;
  if (!f.token_file.empty()) {
    EMBSTORE_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(f.token_file, "--token-file"));
    std::istringstream in(text);
    if (!std::getline(in, o.token) || o.token.empty()) {
      return Status::InvalidArgument("--token-file '" + f.token_file +
                                     "' does not start with a token line");
    }
    while (!o.token.empty() && (o.token.back() == '\r' || o.token.back() == ' '))
      o.token.pop_back();
  }
  o.tls.enabled = f.tls || !f.tls_ca.empty() || !f.tls_cert.empty() || !f.tls_key.empty() ||
                  !f.tls_server_name.empty();
  o.tls.ca_file = f.tls_ca;
  o.tls.cert_file = f.tls_cert;
  o.tls.key_file = f.tls_key;
  o.tls.server_name = f.tls_server_name;
  o.load_balancing = f.load_balancing;
  o.rpc_timeout = std::chrono::milliseconds(static_cast<long long>(f.rpc_timeout_s * 1000));
  return o;
}

Result<std::unique_ptr<client::RowSource>> OpenTable(const std::string& location,
                                                     const std::string& table,
                                                     const ClientFlags& flags,
                                                     client::SourceOptions options) {
  EMBSTORE_ASSIGN_OR_RETURN(client::LocationKind kind, client::ClassifyLocation(location));
  if (client::HoldsSeveralTables(kind) && table.empty()) {
    return Status::InvalidArgument("'" + location + "' is a " +
                                   std::string(client::LocationKindName(kind)) +
                                   " of several tables: add --table NAME");
  }
  if (kind == client::LocationKind::kServer || kind == client::LocationKind::kManifest) {
    EMBSTORE_ASSIGN_OR_RETURN(options.connect, ToConnectOptions(flags));
  }
  options.table = table;
  return client::OpenSource(location, options);
}

}  // namespace embstore::cli
