// S3 requests over libcurl. Signing is libcurl's (CURLOPT_AWS_SIGV4); this file builds the
// canonical pieces libcurl 7.88 leaves to its caller: the path is percent-encoded here, the query
// sorted and encoded (curl signs them as given), and x-amz-content-sha256 is sent explicitly
// (curl before 8.0 does not add it; it signs the header's value as the payload hash).
#include "embstore/objstore/s3.h"

#include <curl/curl.h>
#include <pugixml.hpp>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "embstore/common/ca_bundle.h"

namespace embstore::objstore {

struct S3Client::Request {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  S3Url url;
  std::vector<std::pair<std::string, std::string>> query;  // unencoded; sorted when sent
  std::vector<std::string> headers;                          // "Name: value"
  std::span<const std::byte> body;
  std::span<std::byte> sink;  // GET: a 2xx body goes here (must fill it exactly)
  bool has_sink = false;
};

struct S3Client::Response {
  long status = 0;
  std::string body;                            // everything but a sunk 2xx body
  std::map<std::string, std::string> headers;  // names lowercased
  std::uint64_t sunk = 0;                      // bytes written into Request::sink
};

namespace {

std::once_flag g_curl_init;

bool Unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '~';
}

// RFC 3986 percent-encoding as SigV4 wants it (uppercase hex); '/' kept when `keep_slash`.
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

bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (unsigned char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_')) {
      return false;
    }
  }
  return true;
}

struct Transfer {
  const S3Client::Request* req;
  S3Client::Response* resp;
  CURL* curl;
  std::size_t body_read = 0;
  bool overflow = false;
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
  const std::size_t left = t->req->body.size() - t->body_read;
  const std::size_t len = std::min(left, size * n);
  std::memcpy(out, t->req->body.data() + t->body_read, len);
  t->body_read += len;
  return len;
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

bool IsS3Url(std::string_view s) { return s.rfind("s3://", 0) == 0; }

Result<S3Url> ParseS3Url(std::string_view s) {
  if (!IsS3Url(s)) {
    return Status::InvalidArgument("'" + std::string(s) + "' is not an s3://BUCKET/KEY address");
  }
  std::string_view rest = s.substr(5);
  const std::size_t slash = rest.find('/');
  S3Url u;
  u.bucket = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) u.key = std::string(rest.substr(slash + 1));
  if (!ValidBucket(u.bucket)) {
    return Status::InvalidArgument("'" + std::string(s) + "': '" + u.bucket +
                                   "' is not a bucket name (3 to 63 characters of a-z, 0-9, "
                                   "'.', '-' and '_')");
  }
  return u;
}

Result<S3Url> ParseS3ObjectUrl(std::string_view s, std::string_view what) {
  EMBSTORE_ASSIGN_OR_RETURN(S3Url u, ParseS3Url(s));
  if (u.NamesPrefix()) {
    return Status::InvalidArgument("'" + std::string(s) + "' names a bucket or prefix, not " +
                                   std::string(what));
  }
  return u;
}

namespace {

bool ParseXml(std::string_view body, pugi::xml_document* doc) {
  return doc->load_buffer(body.data(), body.size(), pugi::parse_default, pugi::encoding_utf8);
}

}  // namespace

std::string XmlRootName(std::string_view body) {
  pugi::xml_document doc;
  if (!ParseXml(body, &doc)) return "";
  return doc.document_element().name();
}

std::optional<std::string> XmlRootChildText(std::string_view body, std::string_view name) {
  pugi::xml_document doc;
  if (!ParseXml(body, &doc)) return std::nullopt;
  pugi::xml_node child = doc.document_element().child(std::string(name).c_str());
  if (!child) return std::nullopt;
  return std::string(child.text().get());
}

Result<ListPage> ParseListPage(std::string_view body, const std::string& where) {
  pugi::xml_document doc;
  if (!ParseXml(body, &doc) || std::string_view(doc.document_element().name()) !=
                                   "ListBucketResult") {
    return Status::IOError(where + ": the store's list answer is not a ListBucketResult document");
  }
  const pugi::xml_node root = doc.document_element();
  ListPage page;
  for (pugi::xml_node c : root.children("Contents")) {
    ObjectInfo info;
    info.key = c.child("Key").text().get();
    info.etag = c.child("ETag").text().get();
    const std::string size = c.child("Size").text().get();
    auto r = std::from_chars(size.data(), size.data() + size.size(), info.size);
    if (size.empty() || r.ec != std::errc() || r.ptr != size.data() + size.size()) {
      return Status::IOError(where + ": the store lists object '" + info.key + "' with size '" +
                             size + "', not a number");
    }
    page.objects.push_back(std::move(info));
  }
  page.truncated = std::string_view(root.child("IsTruncated").text().get()) == "true";
  page.next_token = root.child("NextContinuationToken").text().get();
  return page;
}

std::string CompleteMultipartUploadBody(const std::vector<std::string>& part_etags) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("CompleteMultipartUpload");
  for (std::size_t i = 0; i < part_etags.size(); ++i) {
    pugi::xml_node part = root.append_child("Part");
    part.append_child("PartNumber").text().set(std::to_string(i + 1).c_str());
    part.append_child("ETag").text().set(part_etags[i].c_str());
  }
  std::ostringstream out;
  doc.save(out, "", pugi::format_raw | pugi::format_no_declaration);
  return out.str();
}

// Idle easy handles: curl keeps each handle's connections open, so reusing handles reuses them.
struct S3Client::Pool {
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

S3Client::S3Client(S3Config config) : config_(std::move(config)), pool_(new Pool) {
  std::call_once(g_curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

S3Client::~S3Client() = default;

Result<S3Client::Response> S3Client::PerformOnce(const Request& r, bool* retry) {
  *retry = false;
  std::string url;
  const std::string path = UriEncode(r.url.key, /*keep_slash=*/true);
  if (config_.path_style) {
    url = config_.endpoint + "/" + r.url.bucket + (r.url.key.empty() && r.method != "GET" ? "" : "/") +
          path;
  } else {
    const std::size_t scheme = config_.endpoint.find("://");
    url = config_.endpoint.substr(0, scheme + 3) + r.url.bucket + "." +
          config_.endpoint.substr(scheme + 3) + "/" + path;
  }
  if (!r.query.empty()) {
    auto q = r.query;
    std::sort(q.begin(), q.end());
    url += "?";
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (i) url += "&";
      // Always "k=v", also for an empty value: curl signs the query as written, and the store
      // canonicalizes "?uploads" as "uploads=".
      url += UriEncode(q[i].first, false) + "=" + UriEncode(q[i].second, false);
    }
  }

  CURL* curl = pool_->Get();
  if (curl == nullptr) return Status::ResourceExhausted("libcurl could not create a handle");
  Response resp;
  Transfer t{&r, &resp, curl};
  curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!config_.session_token.empty()) {
    headers = curl_slist_append(headers, ("x-amz-security-token: " + config_.session_token).c_str());
  }
  for (const auto& h : r.headers) headers = curl_slist_append(headers, h.c_str());

  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(config_.connect_timeout.count()));
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(config_.stall_timeout.count()));
  const std::string sigv4 = "aws:amz:" + config_.region + ":s3";
  if (!config_.access_key.empty()) {
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(curl, CURLOPT_USERNAME, config_.access_key.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, config_.secret_key.c_str());
  }
  if (r.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (r.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, OnRead);
    curl_easy_setopt(curl, CURLOPT_READDATA, &t);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
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

  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &resp.status);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    curl_easy_cleanup(curl);  // its connection may be broken
    const std::string what = r.url.ToString() + ": " + r.method + " " + config_.endpoint + ": " +
                             (errbuf[0] ? errbuf : curl_easy_strerror(rc));
    if (t.overflow) return Status::Corruption(what + " (the store sent more bytes than asked for)");
    *retry = Retryable(rc);
    return Status::Unavailable(what);
  }
  pool_->Put(curl);
  if (resp.status >= 500 || resp.status == 429) *retry = true;
  return resp;
}

Result<S3Client::Response> S3Client::Perform(const Request& r) {
  auto delay = config_.first_backoff;
  for (int attempt = 1;; ++attempt) {
    bool retry = false;
    Result<Response> resp = PerformOnce(r, &retry);
    if (resp.ok() && r.has_sink && resp->status >= 200 && resp->status < 300 &&
        resp->sunk != r.sink.size()) {
      retry = true;  // a short body: the connection dropped mid-transfer
      resp = Status::Unavailable(r.url.ToString() + ": the store sent " +
                                 std::to_string(resp->sunk) + " of " +
                                 std::to_string(r.sink.size()) + " bytes");
    }
    if (!retry || attempt >= config_.max_attempts) return resp;
    std::this_thread::sleep_for(delay);
    delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::milliseconds(5000));
  }
}

namespace {

// The Status for a non-2xx answer, naming the object and the store's own error code.
Status HttpError(const S3Url& url, const std::string& what, long status, const std::string& body) {
  const std::string code = XmlRootChildText(body, "Code").value_or("");
  const std::string message = XmlRootChildText(body, "Message").value_or("");
  std::string detail = "HTTP " + std::to_string(status);
  if (!code.empty()) detail += " " + code;
  if (!message.empty()) detail += ": " + message;
  const std::string where = url.ToString() + ": " + what;
  switch (status) {
    case 404:
      return Status::NotFound(where + ": no such " +
                              (code == "NoSuchBucket" ? "bucket" : std::string("object")) + " (" +
                              detail + ")");
    case 401:
      return Status::Unauthenticated(where + ": the store wants credentials (" + detail + ")");
    case 403:
      return Status::PermissionDenied(
          where + ": access denied (" + detail +
          "); check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the profile) and the bucket policy");
    case 412:
      return Status::FailedPrecondition(where + ": the object was replaced (" + detail + ")");
    case 416:
      return Status::OutOfRange(where + ": byte range outside the object (" + detail + ")");
    default:
      if (status >= 500 || status == 429) return Status::Unavailable(where + ": " + detail);
      return Status::IOError(where + ": " + detail);
  }
}

bool Ok(long status) { return status >= 200 && status < 300; }

std::string ETagOf(const std::map<std::string, std::string>& h) {
  auto it = h.find("etag");
  return it == h.end() ? std::string() : it->second;
}

}  // namespace

Result<ObjectInfo> S3Client::Head(const S3Url& url) {
  Request r;
  r.method = "HEAD";
  r.url = url;
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status)) {
    // A HEAD answer has no body, so no error code: ask for one byte to hear why (a 403 says
    // SignatureDoesNotMatch or AccessDenied, a 404 NoSuchKey or NoSuchBucket).
    Request why;
    why.url = url;
    why.headers.push_back("Range: bytes=0-0");
    auto again = Perform(why);
    if (again.ok() && again->status == resp.status) resp.body = again->body;
    return HttpError(url, "HEAD", resp.status, resp.body);
  }
  ObjectInfo info;
  info.key = url.key;
  info.etag = ETagOf(resp.headers);
  auto it = resp.headers.find("content-length");
  if (it == resp.headers.end()) {
    return Status::IOError(url.ToString() + ": HEAD answer carries no Content-Length");
  }
  info.size = std::strtoull(it->second.c_str(), nullptr, 10);
  return info;
}

Status S3Client::GetRange(const S3Url& url, std::uint64_t offset, std::span<std::byte> out,
                          const std::string& if_match) {
  if (out.empty()) return Status::OK();
  Request r;
  r.url = url;
  r.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" +
                      std::to_string(offset + out.size() - 1));
  if (!if_match.empty()) r.headers.push_back("If-Match: " + if_match);
  r.sink = out;
  r.has_sink = true;
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status)) {
    return HttpError(url,
                     "GET bytes [" + std::to_string(offset) + ", " +
                         std::to_string(offset + out.size()) + ")",
                     resp.status, resp.body);
  }
  if (resp.status == 200 && offset != 0) {
    return Status::IOError(url.ToString() + ": the store ignored the byte range (HTTP 200)");
  }
  return Status::OK();
}

Result<std::vector<ObjectInfo>> S3Client::List(const std::string& bucket,
                                               const std::string& prefix) {
  std::vector<ObjectInfo> out;
  std::string token;
  const S3Url where{bucket, prefix};
  for (;;) {
    Request r;
    r.url = S3Url{bucket, ""};
    r.query = {{"list-type", "2"}, {"prefix", prefix}};
    if (!token.empty()) r.query.emplace_back("continuation-token", token);
    EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
    if (!Ok(resp.status)) return HttpError(where, "list", resp.status, resp.body);
    EMBSTORE_ASSIGN_OR_RETURN(ListPage page, ParseListPage(resp.body, where.ToString()));
    for (auto& o : page.objects) out.push_back(std::move(o));
    if (!page.truncated) break;
    token = std::move(page.next_token);
    if (token.empty()) {
      return Status::IOError(where.ToString() + ": truncated listing without a continuation token");
    }
  }
  return out;
}

Status S3Client::Put(const S3Url& url, std::span<const std::byte> body) {
  Request r;
  r.method = "PUT";
  r.url = url;
  r.body = body;
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status)) return HttpError(url, "PUT", resp.status, resp.body);
  return Status::OK();
}

Status S3Client::Delete(const S3Url& url) {
  Request r;
  r.method = "DELETE";
  r.url = url;
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status) && resp.status != 404) return HttpError(url, "DELETE", resp.status, resp.body);
  return Status::OK();
}

Status S3Client::CreateBucket(const std::string& bucket) {
  Request r;
  r.method = "PUT";
  r.url = S3Url{bucket, ""};
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status) &&
      XmlRootChildText(resp.body, "Code").value_or("") != "BucketAlreadyOwnedByYou") {
    return HttpError(r.url, "create bucket", resp.status, resp.body);
  }
  return Status::OK();
}

Result<std::string> S3Client::CreateMultipartUpload(const S3Url& url) {
  Request r;
  r.method = "POST";
  r.url = url;
  r.query = {{"uploads", ""}};
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status)) return HttpError(url, "start multipart upload", resp.status, resp.body);
  auto id = XmlRootChildText(resp.body, "UploadId");
  if (!id || id->empty()) {
    return Status::IOError(url.ToString() + ": the store's multipart answer has no UploadId");
  }
  return *id;
}

Result<std::string> S3Client::UploadPart(const S3Url& url, const std::string& upload_id,
                                         int number, std::span<const std::byte> body) {
  Request r;
  r.method = "PUT";
  r.url = url;
  r.query = {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}};
  r.body = body;
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status)) {
    return HttpError(url, "upload part " + std::to_string(number), resp.status, resp.body);
  }
  std::string etag = ETagOf(resp.headers);
  if (etag.empty()) {
    return Status::IOError(url.ToString() + ": part " + std::to_string(number) +
                           " answer carries no ETag");
  }
  return etag;
}

Result<std::string> S3Client::CompleteMultipartUpload(const S3Url& url, const std::string& upload_id,
                                                      const std::vector<std::string>& part_etags) {
  const std::string xml = CompleteMultipartUploadBody(part_etags);
  Request r;
  r.method = "POST";
  r.url = url;
  r.query = {{"uploadId", upload_id}};
  r.headers.push_back("Content-Type: application/xml");
  r.body = std::as_bytes(std::span<const char>(xml.data(), xml.size()));
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  // S3 may answer 200 with an <Error> document when completion fails late.
  if (!Ok(resp.status) || XmlRootName(resp.body) == "Error") {
    return HttpError(url, "complete multipart upload", Ok(resp.status) ? 500 : resp.status,
                     resp.body);
  }
  return XmlRootChildText(resp.body, "ETag").value_or("");
}

Status S3Client::AbortMultipartUpload(const S3Url& url, const std::string& upload_id) {
  Request r;
  r.method = "DELETE";
  r.url = url;
  r.query = {{"uploadId", upload_id}};
  EMBSTORE_ASSIGN_OR_RETURN(Response resp, Perform(r));
  if (!Ok(resp.status) && resp.status != 404) {
    return HttpError(url, "abort multipart upload", resp.status, resp.body);
  }
  return Status::OK();
}

}  // namespace embstore::objstore
