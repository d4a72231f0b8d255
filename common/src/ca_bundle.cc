#include "embstore/common/ca_bundle.h"

#include <sys/stat.h>

#include <cstdlib>

namespace embstore {

std::string SystemCaBundle() {
  if (const char* env = std::getenv("SSL_CERT_FILE"); env != nullptr && *env != '\0') return env;
  static constexpr const char* kBundles[] = {
      "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu, Gentoo, Arch
      "/etc/pki/tls/certs/ca-bundle.crt",                   // RHEL, Fedora, Amazon Linux
      "/etc/ssl/ca-bundle.pem",                             // openSUSE
      "/etc/pki/tls/cacert.pem",                            // OpenELEC
      "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // RHEL 7+, CentOS
      "/etc/ssl/cert.pem",                                  // Alpine
  };
  for (const char* path : kBundles) {
    struct stat st {};
    if (::stat(path, &st) == 0 && S_ISREG(st.st_mode)) return path;
  }
  return "";
}

}  // namespace embstore
