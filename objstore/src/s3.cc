// S3 requests over libcurl. Signing is libcurl's (CURLOPT_AWS_SIGV4); this file builds the
// canonical pieces libcurl 7.88 leaves to its caller: the path is percent-encoded here, the query
// sorted and encoded (curl signs them as given), and x-amz-content-sha256 is sent explicitly
// (curl before 8.0 does not add it; it signs the header's value as the payload hash).
#include "embstore/objstore/s3.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <pugixml.hpp>
#include <sstream>
#include <thread>
#include <utility>

#include "http.h"
#include "parts.h"

namespace embstore::objstore {

struct S3Client::Request {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  ObjectUrl url;
  std::vector<std::pair<std::string, std::string>> query;  // unencoded; sorted when sent
  std::vector<std::string> headers;                        // "Name: value"
  std::span<const std::byte> body;
  std::span<std::byte> sink;  // GET: a 2xx body goes here (must fill it exactly)
  bool has_sink = false;
};

namespace {

using internal::HttpResponse;
using internal::UriEncode;

bool ValidBucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (unsigned char c : b) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_')) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool IsS3Url(std::string_view s) { return s.rfind("s3://", 0) == 0; }

Result<ObjectUrl> ParseS3Url(std::string_view s) {
  if (!IsS3Url(s)) {
    return Status::InvalidArgument("'" + std::string(s) + "' is not an s3://BUCKET/KEY address");
  }
  std::string_view rest = s.substr(5);
  const std::size_t slash = rest.find('/');
  ObjectUrl u;
  u.scheme = "s3";
  u.authority = std::string(rest.substr(0, slash));
  if (slash != std::string_view::npos) u.key = std::string(rest.substr(slash + 1));
  if (!ValidBucket(u.authority)) {
    return Status::InvalidArgument("'" + std::string(s) + "': '" + u.authority +
                                   "' is not a bucket name (3 to 63 characters of a-z, 0-9, "
                                   "'.', '-' and '_')");
  }
  return u;
}

Result<ObjectUrl> ParseS3ObjectUrl(std::string_view s, std::string_view what) {
  EMBSTORE_ASSIGN_OR_RETURN(ObjectUrl u, ParseS3Url(s));
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
  if (!ParseXml(body, &doc) ||
      std::string_view(doc.document_element().name()) != "ListBucketResult") {
    return Status::IOError(where + ": the store's list answer is not a ListBucketResult document");
  }
  const pugi::xml_node root = doc.document_element();
  ListPage page;
  for (pugi::xml_node c : root.children("Contents")) {
    ObjectInfo info;
    info.key = c.child("Key").text().get();
    info.version = c.child("ETag").text().get();
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

S3Client::S3Client(S3Config config)
    : config_(std::move(config)),
      http_(std::make_unique<internal::HttpClient>(internal::HttpOptionsOf(config_))) {}

S3Client::~S3Client() = default;

Result<HttpResponse> S3Client::Perform(const Request& r) {
  internal::HttpRequest h;
  const std::string path = UriEncode(r.url.key, /*keep_slash=*/true);
  const std::string& bucket = r.url.authority;
  if (config_.path_style) {
    h.url = config_.endpoint + "/" + bucket + (r.url.key.empty() && r.method != "GET" ? "" : "/") +
            path;
  } else {
    const std::size_t scheme = config_.endpoint.find("://");
    h.url = config_.endpoint.substr(0, scheme + 3) + bucket + "." +
            config_.endpoint.substr(scheme + 3) + "/" + path;
  }
  if (!r.query.empty()) {
    auto q = r.query;
    std::sort(q.begin(), q.end());
    h.url += "?";
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (i) h.url += "&";
      // Always "k=v", also for an empty value: curl signs the query as written, and the store
      // canonicalizes "?uploads" as "uploads=".
      h.url += UriEncode(q[i].first, false) + "=" + UriEncode(q[i].second, false);
    }
  }
  h.method = r.method;
  h.headers.push_back("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  if (!config_.session_token.empty()) {
    h.headers.push_back("x-amz-security-token: " + config_.session_token);
  }
  for (const auto& x : r.headers) h.headers.push_back(x);
  h.body = r.body;
  h.sink = r.sink;
  h.has_sink = r.has_sink;
  h.what = r.url.ToString() + ": " + r.method + " " + config_.endpoint;
  const std::string sigv4 = "aws:amz:" + config_.region + ":s3";
  if (!config_.access_key.empty()) {
    h.prepare = [&](CURL* curl) {
      curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, sigv4.c_str());
      curl_easy_setopt(curl, CURLOPT_USERNAME, config_.access_key.c_str());
      curl_easy_setopt(curl, CURLOPT_PASSWORD, config_.secret_key.c_str());
    };
  }
  return http_->Perform(h);
}

namespace {

// The Status for a non-2xx answer, naming the object and the store's own error code.
Status HttpError(const ObjectUrl& url, const std::string& what, long status,
                 const std::string& body) {
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
      return Status::PermissionDenied(where + ": access denied (" + detail +
                                      "); check AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or the "
                                      "profile) and the bucket policy");
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

Result<ObjectInfo> S3Client::Stat(const ObjectUrl& url) {
  Request r;
  r.method = "HEAD";
  r.url = url;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
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
  info.version = ETagOf(resp.headers);
  auto it = resp.headers.find("content-length");
  if (it == resp.headers.end()) {
    return Status::IOError(url.ToString() + ": HEAD answer carries no Content-Length");
  }
  info.size = std::strtoull(it->second.c_str(), nullptr, 10);
  return info;
}

Status S3Client::GetRange(const ObjectUrl& url, std::uint64_t offset, std::span<std::byte> out,
                          const std::string& if_match) {
  if (out.empty()) return Status::OK();
  Request r;
  r.url = url;
  r.headers.push_back("Range: bytes=" + std::to_string(offset) + "-" +
                      std::to_string(offset + out.size() - 1));
  if (!if_match.empty()) r.headers.push_back("If-Match: " + if_match);
  r.sink = out;
  r.has_sink = true;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
  if (!Ok(resp.status)) {
    return HttpError(
        url,
        "GET bytes [" + std::to_string(offset) + ", " + std::to_string(offset + out.size()) + ")",
        resp.status, resp.body);
  }
  if (resp.status == 200 && offset != 0) {
    return Status::IOError(url.ToString() + ": the store ignored the byte range (HTTP 200)");
  }
  return Status::OK();
}

Status S3Client::ReadRange(const ObjectUrl& url, const std::string& version, std::uint64_t offset,
                           std::span<std::byte> out) {
  return GetRange(url, offset, out, version);
}

Result<std::vector<ObjectInfo>> S3Client::List(const ObjectUrl& where) {
  std::vector<ObjectInfo> out;
  std::string token;
  for (;;) {
    Request r;
    r.url = ObjectUrl{"s3", where.authority, ""};
    r.query = {{"list-type", "2"}, {"prefix", where.key}};
    if (!token.empty()) r.query.emplace_back("continuation-token", token);
    EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
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

Status S3Client::Put(const ObjectUrl& url, std::span<const std::byte> body) {
  Request r;
  r.method = "PUT";
  r.url = url;
  r.body = body;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
  if (!Ok(resp.status)) return HttpError(url, "PUT", resp.status, resp.body);
  return Status::OK();
}

Status S3Client::Delete(const ObjectUrl& url) {
  Request r;
  r.method = "DELETE";
  r.url = url;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
  if (!Ok(resp.status) && resp.status != 404)
    return HttpError(url, "DELETE", resp.status, resp.body);
  return Status::OK();
}

Status S3Client::CreateBucket(const std::string& bucket) {
  Request r;
  r.method = "PUT";
  r.url = ObjectUrl{"s3", bucket, ""};
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
  if (!Ok(resp.status) &&
      XmlRootChildText(resp.body, "Code").value_or("") != "BucketAlreadyOwnedByYou") {
    return HttpError(r.url, "create bucket", resp.status, resp.body);
  }
  return Status::OK();
}

Result<std::string> S3Client::CreateMultipartUpload(const ObjectUrl& url) {
  Request r;
  r.method = "POST";
  r.url = url;
  r.query = {{"uploads", ""}};
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
  if (!Ok(resp.status)) return HttpError(url, "start multipart upload", resp.status, resp.body);
  auto id = XmlRootChildText(resp.body, "UploadId");
  if (!id || id->empty()) {
    return Status::IOError(url.ToString() + ": the store's multipart answer has no UploadId");
  }
  return *id;
}

Result<std::string> S3Client::UploadPart(const ObjectUrl& url, const std::string& upload_id,
                                         int number, std::span<const std::byte> body) {
  Request r;
  r.method = "PUT";
  r.url = url;
  r.query = {{"partNumber", std::to_string(number)}, {"uploadId", upload_id}};
  r.body = body;
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
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

Result<std::string> S3Client::CompleteMultipartUpload(const ObjectUrl& url,
                                                      const std::string& upload_id,
                                                      const std::vector<std::string>& part_etags) {
  const std::string xml = CompleteMultipartUploadBody(part_etags);
  Request r;
  r.method = "POST";
  r.url = url;
  r.query = {{"uploadId", upload_id}};
  r.headers.push_back("Content-Type: application/xml");
  r.body = std::as_bytes(std::span<const char>(xml.data(), xml.size()));
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
  // S3 may answer 200 with an <Error> document when completion fails late.
  if (!Ok(resp.status) || XmlRootName(resp.body) == "Error") {
    return HttpError(url, "complete multipart upload", Ok(resp.status) ? 500 : resp.status,
                     resp.body);
  }
  return XmlRootChildText(resp.body, "ETag").value_or("");
}

Status S3Client::AbortMultipartUpload(const ObjectUrl& url, const std::string& upload_id) {
  Request r;
  r.method = "DELETE";
  r.url = url;
  r.query = {{"uploadId", upload_id}};
  EMBSTORE_ASSIGN_OR_RETURN(HttpResponse resp, Perform(r));
  if (!Ok(resp.status) && resp.status != 404) {
    return HttpError(url, "abort multipart upload", resp.status, resp.body);
  }
  return Status::OK();
}

Result<std::string> S3Client::Upload(const std::string& path, const ObjectUrl& url,
                                     const TransferOptions& o) {
  EMBSTORE_ASSIGN_OR_RETURN(internal::LocalFile file, internal::LocalFile::Open(path));
  const std::uint64_t size = file.size();
  // S3: parts of at least 5 MiB (but the last), at most 10,000 parts.
  std::uint64_t part = std::max<std::uint64_t>(5ull << 20, o.part_bytes);
  part = std::max(part, (size + 9999) / 10000);
  std::string etag;
  if (size <= part) {
    std::vector<std::byte> all(size);
    EMBSTORE_RETURN_NOT_OK(file.ReadAt(0, all));
    EMBSTORE_RETURN_NOT_OK(Put(url, all));
  } else {
    EMBSTORE_ASSIGN_OR_RETURN(std::string id, CreateMultipartUpload(url));
    const std::uint64_t count = (size + part - 1) / part;
    std::vector<std::string> etags(count);
    std::atomic<std::uint64_t> done{0};
    Status st = internal::RunParts(
        count, o.parallel, size, done, o.progress, [&](std::uint64_t i) -> Status {
          thread_local std::vector<std::byte> buf;
          const std::uint64_t off = i * part;
          buf.resize(std::min(part, size - off));
          EMBSTORE_RETURN_NOT_OK(file.ReadAt(off, buf));
          EMBSTORE_ASSIGN_OR_RETURN(etags[i], UploadPart(url, id, static_cast<int>(i + 1), buf));
          done += buf.size();
          return Status::OK();
        });
    if (st.ok()) {
      auto completed = CompleteMultipartUpload(url, id, etags);
      if (completed.ok()) etag = *completed;
      st = completed.status();
    }
    if (!st.ok()) {
      (void)AbortMultipartUpload(url, id);  // best effort: the store expires it otherwise
      return st;
    }
  }
  if (etag.empty()) {
    auto head = Stat(url);
    if (head.ok()) etag = head->version;
  }
  return etag;
}

}  // namespace embstore::objstore
