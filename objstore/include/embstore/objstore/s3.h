// S3Client: the ObjectStore of s3:// URLs, and the S3 requests embstore needs (HEAD, ranged GET,
// ListObjectsV2, PUT, multipart upload, DELETE), over libcurl, signed with libcurl's own AWS SigV4
// (CURLOPT_AWS_SIGV4).
//
// Works with AWS S3 and S3-compatible stores (MinIO, Ceph RGW, SeaweedFS, GCS interop, Ozone's
// gateway). A custom endpoint (AWS_ENDPOINT_URL) is addressed path-style
// (ENDPOINT/BUCKET/KEY); AWS itself virtual-host style.
//
// Errors name the object (s3://bucket/key) and say what the store answered: 403 is
// PermissionDenied (with the store's error code, e.g. SignatureDoesNotMatch), 404 NotFound, a
// failed If-Match FailedPrecondition ("replaced"), 5xx and connection failures Unavailable after
// the retries (ObjectStoreOptions::max_attempts with exponential backoff, so a store that restarts
// during a download is waited for).
//
// Thread safety: an S3Client may be used from many threads at once; each request runs on its
// calling thread. Connections are kept and reused per client.
#ifndef EMBSTORE_OBJSTORE_S3_H_
#define EMBSTORE_OBJSTORE_S3_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "embstore/common/status.h"
#include "embstore/objstore/object_store.h"

namespace embstore::objstore {

namespace internal {
class HttpClient;
struct HttpResponse;
}  // namespace internal

// s3://BUCKET/KEY addresses are ObjectUrls with scheme "s3" and the bucket as authority.
bool IsS3Url(std::string_view s);
// InvalidArgument naming `s` when it is not s3://BUCKET[/KEY] with a valid bucket name.
Result<ObjectUrl> ParseS3Url(std::string_view s);
// ParseS3Url, and InvalidArgument "'s' names a bucket or prefix, not <what>" unless it names an
// object (`what`: "a table object", "an object key").
Result<ObjectUrl> ParseS3ObjectUrl(std::string_view s, std::string_view what);

struct S3Config {
  std::string endpoint;  // scheme://host[:port], no trailing slash
  std::string region = "us-east-1";
  std::string access_key;
  std::string secret_key;
  std::string session_token;
  bool path_style = true;  // ENDPOINT/BUCKET/KEY; false: BUCKET.HOST/KEY (AWS)
  int max_attempts = 8;    // per request, for 5xx, 429 and connection failures
  std::chrono::milliseconds first_backoff{100};  // doubles per attempt, at most 5 s
  std::chrono::milliseconds connect_timeout{10000};
  // A request that moves fewer than 1 byte/s for this long is dropped (and retried).
  std::chrono::seconds stall_timeout{30};
};

// The configuration the AWS tools would use, from `getenv`: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or AWS_DEFAULT_REGION),
// AWS_ENDPOINT_URL (or AWS_ENDPOINT_URL_S3); missing credentials and region come from the
// profile AWS_PROFILE (default "default") of AWS_SHARED_CREDENTIALS_FILE (default
// ~/.aws/credentials) and AWS_CONFIG_FILE (default ~/.aws/config). No credentials at all means
// anonymous (unsigned) requests. InvalidArgument for a half-given key pair or a bad endpoint.
Result<S3Config> S3ConfigFromEnvironment(const GetEnv& getenv);
Result<S3Config> S3ConfigFromEnvironment();  // the process's environment

class S3Client final : public ObjectStore {
 public:
  explicit S3Client(S3Config config);
  ~S3Client() override;
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const { return config_; }

  // ObjectStore. Stat is a HEAD (the version is the ETag); ReadRange a ranged GET with If-Match;
  // List every key below the prefix (all pages of ListObjectsV2); Upload a PUT for a file of one
  // part, a multipart upload in `options.parallel` parts otherwise.
  Result<ObjectInfo> Stat(const ObjectUrl& url) override;
  Status ReadRange(const ObjectUrl& url, const std::string& version, std::uint64_t offset,
                   std::span<std::byte> out) override;
  Result<std::vector<ObjectInfo>> List(const ObjectUrl& prefix) override;
  Result<std::string> Upload(const std::string& path, const ObjectUrl& url,
                             const TransferOptions& options) override;
  Status Delete(const ObjectUrl& url) override;

  // Bytes [offset, offset + out.size()) of the object into `out`. With `if_match` (an ETag), a
  // replaced object is FailedPrecondition instead of bytes of the new version.
  Status GetRange(const ObjectUrl& url, std::uint64_t offset, std::span<std::byte> out,
                  const std::string& if_match = {});

  Status Put(const ObjectUrl& url, std::span<const std::byte> body);
  Status CreateBucket(const std::string& bucket);

  // Multipart upload: the object appears under its key only when Complete succeeds, whole.
  Result<std::string> CreateMultipartUpload(const ObjectUrl& url);  // the upload id
  // Part `number` (1-based); returns its ETag for Complete.
  Result<std::string> UploadPart(const ObjectUrl& url, const std::string& upload_id, int number,
                                 std::span<const std::byte> body);
  // Returns the new object's ETag.
  Result<std::string> CompleteMultipartUpload(const ObjectUrl& url, const std::string& upload_id,
                                              const std::vector<std::string>& part_etags);
  Status AbortMultipartUpload(const ObjectUrl& url, const std::string& upload_id);

  struct Request;

 private:
  Result<internal::HttpResponse> Perform(const Request& request);

  S3Config config_;
  std::unique_ptr<internal::HttpClient> http_;
};

// What S3 replies say, read from their XML bodies with pugixml (entities and character
// references decoded). Exposed for tests.
//
// The root element of a reply: "Error", "ListBucketResult", ...; empty when the body is not
// well-formed XML (a proxy's HTML page, a truncated answer).
std::string XmlRootName(std::string_view body);
// The text of the root's first child element `name` (<Error><Code>, <...Result><UploadId>);
// nullopt when there is none or the body is not XML.
std::optional<std::string> XmlRootChildText(std::string_view body, std::string_view name);

// One page of a ListObjectsV2 answer.
struct ListPage {
  std::vector<ObjectInfo> objects;
  bool truncated = false;
  std::string next_token;  // NextContinuationToken, when truncated
};
// IOError naming `where` when the body is not a ListBucketResult or an object's Size is not a
// number.
Result<ListPage> ParseListPage(std::string_view body, const std::string& where);

// The CompleteMultipartUpload request body for parts 1..n with these ETags (escaped as XML).
std::string CompleteMultipartUploadBody(const std::vector<std::string>& part_etags);

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_S3_H_
