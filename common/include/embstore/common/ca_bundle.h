// Where this host keeps its trusted CA certificates, for TLS clients (libcurl for S3, gRPC).
// A portable build (the manylinux wheel) carries its own OpenSSL, whose compiled-in default
// locations follow Debian's layout; RHEL, Fedora, SUSE and Alpine keep the bundle elsewhere, so
// embstore looks for it itself, the way Go's crypto/x509 does.
#ifndef EMBSTORE_COMMON_CA_BUNDLE_H_
#define EMBSTORE_COMMON_CA_BUNDLE_H_

#include <string>

namespace embstore {

// $SSL_CERT_FILE when it is set (even to a missing file: the TLS library then reports it), else
// the first of the distributions' CA bundle files that exists (Debian and Ubuntu, RHEL and Fedora,
// SUSE, Alpine), else "" (the TLS library's defaults apply).
std::string SystemCaBundle();

}  // namespace embstore

#endif  // EMBSTORE_COMMON_CA_BUNDLE_H_
