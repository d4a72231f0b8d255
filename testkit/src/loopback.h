// Loopback TCP helpers the test servers share (S3Server, HdfsServer): whether a port is free, and
// one small HTTP/1.0 request to 127.0.0.1. Internal to testkit.
#ifndef EMBSTORE_TESTKIT_LOOPBACK_H_
#define EMBSTORE_TESTKIT_LOOPBACK_H_

#include <string>

namespace embstore::testkit::internal {

// Whether a server could bind 127.0.0.1:port now (with SO_REUSEADDR, as servers bind: ports of
// connections lingering in TIME_WAIT are free).
bool PortFree(int port);

// The status code of `method path` on 127.0.0.1:port (0 when nothing answered within 5 s), and
// the body into *body when given.
int HttpStatus(int port, const std::string& method, const std::string& path,
               std::string* body = nullptr);

// A random port in [20000, 45000) seeded per process and call.
int RandomPort();

}  // namespace embstore::testkit::internal

#endif  // EMBSTORE_TESTKIT_LOOPBACK_H_
