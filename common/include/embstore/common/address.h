// Network addresses as users write them, checked in one place: the client's server targets, the
// server's --listen and --metrics-listen addresses, shard manifests and the Python package all
// parse them here (docs/CLIENT.md, "Targets").
//
// gRPC itself reads a port with atoi-like arithmetic, so "127.0.0.1:99999" would connect to port
// 34463 (99999 - 65536) and talk to whatever server listens there. Every address is checked here
// first, and a bad one is InvalidArgument naming it, before any connection is made.
//
// Forms (gRPC's target syntax, the ones embstore documents):
//   HOST:PORT            a host name, an IPv4 address or [IPv6] in brackets, and a port
//   unix:PATH            a Unix domain socket (unix:///abs/path too)
//   unix-abstract:NAME   a socket in Linux's abstract namespace
//   dns:[//AUTHORITY/]HOST[:PORT]   resolved by DNS, every address used (with load balancing)
//   ipv4:ADDR:PORT[,...] and ipv6:[ADDR]:PORT[,...]   fixed lists of addresses
// PORT is decimal digits from 1 to 65535; a listening address may also use 0 (any free port).
//
// Thread safety: pure functions.
#ifndef EMBSTORE_COMMON_ADDRESS_H_
#define EMBSTORE_COMMON_ADDRESS_H_

#include <string>
#include <string_view>

#include "embstore/common/status.h"

namespace embstore {

enum class AddressUse {
  kConnect,  // a server to connect to: port 1 to 65535
  kListen,   // an address to listen on: port 0 (any free port) allowed
};

struct Address {
  enum class Kind { kHostPort, kUnix, kUnixAbstract, kDns, kIpList };
  Kind kind = Kind::kHostPort;
  std::string host;  // kHostPort: the host, without brackets
  int port = 0;      // kHostPort: the port
};

// Checks `text` as an address for `use`. InvalidArgument otherwise, naming `what` ("server
// target", "listen address", ...) and the text, and saying what was wrong ("port 99999 is out of
// range: ports are 1 to 65535").
Result<Address> ParseAddress(std::string_view text, AddressUse use, std::string_view what);

}  // namespace embstore

#endif  // EMBSTORE_COMMON_ADDRESS_H_
