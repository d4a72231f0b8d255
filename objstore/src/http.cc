#include "http.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "embstore/common/ca_bundle.h"

namespace embstore::objstore::internal {
namespace {

std::once_flag g_curl_init;

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

struct Transfer {
  const HttpRequest* req;
  HttpResponse* resp;
  CURL* curl;
  std::uint64_t body_read = 0;
  bool overflow = false;
  bool cancelled = false;
  Status read_error;
};

std::size_t OnHeader(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) t->resp->headers.clear();  // a new response (after 100)
  const std::size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    t->resp->headers[Lower(std::string(line.substr(0, colon)))] = Trim(line.substr(colon + 1));
  }
  return size * n;
}

std::size_t OnBody(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t len = size * n;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->req->has_sink && status >= 200 && status < 300) {
    auto& sunk = t->resp->sunk;
    if (sunk + len > t->req->sink.size()) {
      t->overflow = true;
      return 0;  // aborts the transfer: more bytes than asked for
    }
    std::memcpy(t->req->sink.data() + sunk, data, len);
    sunk += len;
  } else if (t->resp->body.size() < (1u << 20)) {
    t->resp->body.append(data, len);
  }
  return len;
}

std::size_t OnRead(char* out, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const HttpRequest& r = *t->req;
  if (r.body_fd >= 0) {
    const std::uint64_t left = r.body_len - t->body_read;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, size * n));
    if (want == 0) return 0;
    for (;;) {
      const ssize_t got =
          ::pread(r.body_fd, out, want, static_cast<off_t>(r.body_offset + t->body_read));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        t->read_error = got < 0 ? Status::FromErrno(r.what + ": read the file being sent", errno)
                                : Status::IOError(r.what + ": the file being sent shrank");
        return CURL_READFUNC_ABORT;
      }
      t->body_read += static_cast<std::uint64_t>(got);
      return static_cast<std::size_t>(got);
    }
  }
  const std::size_t left = r.body.size() - static_cast<std::size_t>(t->body_read);
  const std::size_t len = std::min(left, size * n);
  std::memcpy(out, r.body.data() + t->body_read, len);
  t->body_read += len;
  return len;
}

int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t sent) {
  auto* t = static_cast<Transfer*>(user);
  if (t->req->on_sent && !t->req->on_sent(static_cast<std::uint64_t>(sent))) {
    t->cancelled = true;
    return 1;
  }
  return 0;
}

bool Retryable(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool HasSpnego() {
  const curl_version_info_data* v = curl_version_info(CURLVERSION_NOW);
  return v != nullptr && (v->features & CURL_VERSION_SPNEGO) != 0 &&
         (v->features & CURL_VERSION_GSSAPI) != 0;
}

std::string UriEncode(std::string_view s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (Unreserved(c) || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// Idle easy handles: curl keeps each handle's connections open, so reusing handles reuses them.
struct HttpClient::Pool {
  std::mutex mu;
  std::vector<CURL*> idle;
  ~Pool() {
    for (CURL* c : idle) curl_easy_cleanup(c);
  }
  CURL* Get() {
    {
      std::lock_guard<std::mutex> l(mu);
      if (!idle.empty()) {
        CURL* c = idle.back();
        idle.pop_back();
        curl_easy_reset(c);
        return c;
      }
    }
    return curl_easy_init();
  }
  void Put(CURL* c) {
    std::lock_guard<std::mutex> l(mu);
    idle.push_back(c);
  }
};

HttpClient::HttpClient(HttpOptions options) : options_(options), pool_(new Pool) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::PerformOnce(const HttpRequest& r, bool* retry) {
  *retry = false;
  CURL* curl = pool_->Get();
  if (curl == nullptr) return Status::ResourceExhausted("libcurl could not create a handle");
  HttpResponse resp;
  Transfer t{&r, &resp, curl, 0, false, false, Status::OK()};
  curl_slist* headers = nullptr;
  for (const auto& h : r.headers) headers = curl_slist_append(headers, h.c_str());

  curl_easy_setopt(curl, CURLOPT_URL, r.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(options_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options_.stall_timeout.count()));
  if (r.on_sent) {
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, OnProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
  }
  if (r.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (r.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(curl, CURLOPT_READDATA, &t);
    const std::uint64_t len = r.body_fd >= 0 ? r.body_len : r.body.size();
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(len));
  } else if (r.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, reinterpret_cast<const char*>(r.body.data()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
  } else if (r.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
  // The host's CA bundle, wherever its distribution keeps it (a portable build's own OpenSSL
  // would otherwise look only where Debian does).
  static const std::string ca_bundle = SystemCaBundle();
  if (!ca_bundle.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, ca_bundle.c_str());
  if (r.prepare) r.prepare(curl);

  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    curl_easy_cleanup(curl);  // its connection may be broken
    if (t.cancelled) return Status::Cancelled(r.what + ": cancelled");
    if (!t.read_error.ok()) return t.read_error;
    const std::string what = r.what + ": " + (errbuf[0] ? errbuf : curl_easy_strerror(rc));
    if (t.overflow) return Status::Corruption(what + " (the store sent more bytes than asked for)");
    *retry = Retryable(rc);
    return Status::Unavailable(what);
  }
  pool_->Put(curl);
  if (resp.status >= 500 || resp.status == 429) *retry = true;
  return resp;
}

Result<HttpResponse> HttpClient::Perform(const HttpRequest& r, int max_attempts) {
  if (max_attempts <= 0) max_attempts = options_.max_attempts;
  auto delay = options_.first_backoff;
  const auto start = std::chrono::steady_clock::now();
  for (int attempt = 1;; ++attempt) {
    bool retry = false;
    Result<HttpResponse> resp = PerformOnce(r, &retry);
    if (resp.ok() && r.has_sink && resp->status >= 200 && resp->status < 300 &&
        resp->sunk != r.sink.size()) {
      retry = true;  // a short body: the connection dropped mid-transfer
      resp = Status::Unavailable(r.what + ": the store sent " + std::to_string(resp->sunk) +
                                 " of " + std::to_string(r.sink.size()) + " bytes");
    }
    if (retry && attempt >= max_attempts && attempt > 1 && !resp.ok()) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      char took[64];
      std::snprintf(took, sizeof took, " (gave up after %d attempts in %.1f s)", attempt, seconds);
      return Status(resp.status().code(), resp.status().message() + took);
    }
    if (!retry || attempt >= max_attempts) return resp;
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::milliseconds(5000));
  }
}

}  // namespace embstore::objstore::internal
