// HttpClient: the HTTP requests of the object stores (S3, WebHDFS) over libcurl: a pool of easy
// handles (so connections are reused), bodies from memory or from a file, 2xx bodies written
// straight into the caller's buffer, and retries with exponential backoff for connection
// failures, 5xx, 429 and bodies cut short. Internal to embstore::objstore.
//
// Thread safety: Perform may be called from many threads at once.
#ifndef EMBSTORE_OBJSTORE_HTTP_H_
#define EMBSTORE_OBJSTORE_HTTP_H_

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/common/status.h"

namespace embstore::objstore::internal {

struct HttpOptions {
  int max_attempts = 8;                          // per request
  std::chrono::milliseconds first_backoff{100};  // doubles per attempt, at most 5 s
  std::chrono::milliseconds connect_timeout{10000};
  // A request that moves fewer than 1 byte/s for this long is dropped (and retried).
  std::chrono::seconds stall_timeout{30};
};

// The HttpOptions of a store's configuration (S3Config, HdfsConfig): the fields of the same names.
template <typename StoreConfig>
HttpOptions HttpOptionsOf(const StoreConfig& c) {
  HttpOptions o;
  o.max_attempts = c.max_attempts;
  o.first_backoff = c.first_backoff;
  o.connect_timeout = c.connect_timeout;
  o.stall_timeout = c.stall_timeout;
  return o;
}

struct HttpRequest {
  std::string method = "GET";        // GET, HEAD, PUT, POST, DELETE
  std::string url;                   // complete and encoded
  std::vector<std::string> headers;  // "Name: value"
  std::span<const std::byte> body;   // PUT and POST
  // PUT: the body is `body_len` bytes of the file `body_fd` from `body_offset` instead.
  int body_fd = -1;
  std::uint64_t body_offset = 0, body_len = 0;
  std::span<std::byte> sink;  // a 2xx body goes here (must fill it exactly) when has_sink
  bool has_sink = false;
  std::string what;  // names the request in errors: "s3://b/k: GET"
  // Sets further curl options on the handle (signing, authentication) before it is performed.
  std::function<void(CURL*)> prepare;
  // Bytes of the body sent so far; return false to cancel. Called from the calling thread.
  std::function<bool(std::uint64_t)> on_sent;
};

struct HttpResponse {
  long status = 0;
  std::string body;                            // everything but a sunk 2xx body (first 1 MiB)
  std::map<std::string, std::string> headers;  // names lowercased
  std::uint64_t sunk = 0;                      // bytes written into HttpRequest::sink
};

class HttpClient {
 public:
  explicit HttpClient(HttpOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  const HttpOptions& options() const { return options_; }

  // The request, attempted up to `max_attempts` times (0: options().max_attempts) while it fails
  // in a way worth retrying. A transport failure is Unavailable naming request.what; a non-2xx
  // answer is returned as it is, for the caller to read.
  Result<HttpResponse> Perform(const HttpRequest& request, int max_attempts = 0);

 private:
  Result<HttpResponse> PerformOnce(const HttpRequest& request, bool* retry);

  HttpOptions options_;
  struct Pool;
  std::unique_ptr<Pool> pool_;
};

// Whether this process's libcurl can authenticate with SPNEGO (Kerberos through GSS-API): the
// Debian build's can; a libcurl built without GSS-API (the portable wheels') cannot.
bool HasSpnego();

// RFC 3986 percent-encoding (uppercase hex), '/' kept when `keep_slash`.
std::string UriEncode(std::string_view s, bool keep_slash);

}  // namespace embstore::objstore::internal

#endif  // EMBSTORE_OBJSTORE_HTTP_H_
