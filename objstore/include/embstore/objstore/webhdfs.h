// WebHdfsClient: the ObjectStore of hdfs:// URLs, over Hadoop's WebHDFS REST API with libcurl,
// and reads straight from the DataNodes with Hadoop's data transfer protocol where they can be
// reached: no JVM, no libhdfs. Works against a NameNode's HTTP port and against HttpFS gateways
// (the same API on one host; HttpFS serves data itself instead of redirecting to DataNodes).
//
//   hdfs://NAMENODE[:PORT]/PATH   PORT: the NameNode's HTTP port (dfs.namenode.http-address,
//                                 9870 when not given), not its RPC port (8020).
//
// Requests:
//   Stat      GETFILESTATUS; the version is the file's inode id (fileId), which a file written
//             again or renamed over gets anew.
//   ReadRange straight from a DataNode where it can (datatransfer.h): GET_BLOCK_LOCATIONS of
//             /.reserved/.inodes/ID for the range, then Hadoop's own READ_BLOCK operation on a
//             DataNode's transfer port, every 512-byte chunk checked against its HDFS CRC, the
//             next replica tried when one fails. Where that is not possible it reads over
//             WebHDFS, and keeps to WebHDFS from then on when the reason is the cluster's (its
//             DataNodes want SASL or encryption, or their transfer ports do not answer while
//             the NameNode does): OPEN of /.reserved/.inodes/ID with offset and length,
//             following the NameNode's redirect to a DataNode. Either way the bytes are those of
//             the version Stat saw, by inode: a file replaced since is FailedPrecondition (the
//             inode is gone), never a mix. A DataNode that cannot be reached or fails mid-read
//             over WebHDFS is excluded (excludedatanodes) and the read asked of the NameNode
//             again, which sends it to another replica.
//   List      LISTSTATUS of the folder.
//   Upload    CREATE of a temporary file next to the destination (".NAME.tmp-embstore-..."), the
//             data streamed to the DataNode, then RENAME with OVERWRITE onto the destination: the
//             file appears whole or not at all. The temporary file is deleted on failure.
//   Delete    DELETE (not recursive).
// Errors name the hdfs:// URL and the WebHDFS exception (RemoteException's exception and
// message): FileNotFoundException is NotFound, AccessControlException PermissionDenied, 401
// Unauthenticated, StandbyException, SafeModeException, RetriableException and 5xx Unavailable
// (retried), a NameNode that cannot be reached Unavailable after the retries.
//
// Authentication: simple (user.name=USER on every request), a delegation token
// (delegation=TOKEN), or Kerberos (SPNEGO through libcurl's GSS-API, with the credentials of the
// process's ticket cache: kinit first).
//
// Thread safety: as ObjectStore; connections are pooled per client.
#ifndef EMBSTORE_OBJSTORE_WEBHDFS_H_
#define EMBSTORE_OBJSTORE_WEBHDFS_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "embstore/common/status.h"
#include "embstore/objstore/object_store.h"

namespace embstore::objstore {

namespace internal {
class HttpClient;
struct HttpRequest;
struct HttpResponse;
}  // namespace internal

constexpr int kDefaultWebHdfsPort = 9870;

bool IsHdfsUrl(std::string_view s);
// InvalidArgument naming `s` unless it is hdfs://HOST[:PORT][/PATH] with a valid host and port.
Result<ObjectUrl> ParseHdfsUrl(std::string_view s);

struct HdfsConfig {
  std::string user;              // user.name, for simple authentication; empty: not sent
  std::string delegation_token;  // sent as delegation=...; replaces user.name
  bool kerberos = false;         // SPNEGO (libcurl's GSS-API, the process's ticket cache)
  bool https = false;            // https:// to the NameNode (swebhdfs)
  std::string ca_file;           // with https: a CA bundle other than the system's
  // Reads straight from the DataNodes' transfer ports (see above); off: every read over WebHDFS.
  bool direct_reads = true;
  // The HDFS block size of files this client writes; 0: the cluster's (dfs.blocksize).
  std::uint64_t block_size = 0;
  int max_attempts = 6;  // per request, for 5xx, retriable exceptions and connection failures
  std::chrono::milliseconds first_backoff{200};  // doubles per attempt, at most 5 s
  std::chrono::milliseconds connect_timeout{10000};
  // A request that moves fewer than 1 byte/s for this long is dropped (and retried).
  std::chrono::seconds stall_timeout{30};
};

// From the environment, as Hadoop's tools take it where they can:
//   HADOOP_USER_NAME        the user (default: the login name of the process's user)
//   EMBSTORE_HDFS_DELEGATION_TOKEN   a WebHDFS delegation token (its URL-safe string form)
//   EMBSTORE_HDFS_AUTH      "simple" (default) or "kerberos"
//   EMBSTORE_HDFS_HTTPS     1: the NameNode's HTTPS port (dfs.namenode.https-address)
//   EMBSTORE_HDFS_CA_FILE   a CA bundle for HTTPS
//   EMBSTORE_HDFS_DIRECT_READS   0: every read over WebHDFS, never straight from DataNodes
//   EMBSTORE_HDFS_BLOCK_SIZE     bytes: the HDFS block size of files written (default: the
//                                cluster's)
// InvalidArgument for a malformed value; FailedPrecondition for EMBSTORE_HDFS_AUTH=kerberos where
// libcurl has no GSS-API.
Result<HdfsConfig> HdfsConfigFromEnvironment(const GetEnv& getenv);
Result<HdfsConfig> HdfsConfigFromEnvironment();

class WebHdfsClient final : public ObjectStore {
 public:
  explicit WebHdfsClient(HdfsConfig config);
  ~WebHdfsClient() override;
  WebHdfsClient(const WebHdfsClient&) = delete;
  WebHdfsClient& operator=(const WebHdfsClient&) = delete;

  const HdfsConfig& config() const { return config_; }

  Result<ObjectInfo> Stat(const ObjectUrl& url) override;
  Status ReadRange(const ObjectUrl& url, const std::string& version, std::uint64_t offset,
                   std::span<std::byte> out) override;
  Result<std::vector<ObjectInfo>> List(const ObjectUrl& prefix) override;
  Result<std::string> Upload(const std::string& path, const ObjectUrl& url,
                             const TransferOptions& options) override;
  Status Delete(const ObjectUrl& url) override;

  // Bytes ReadRange brought straight from DataNodes, and over WebHDFS, so far.
  std::uint64_t direct_bytes() const { return direct_bytes_.load(); }
  std::uint64_t webhdfs_bytes() const { return webhdfs_bytes_.load(); }

  // MKDIRS of the folder (and its parents); an existing folder is not an error.
  Status MakeDirectories(const ObjectUrl& url);
  // RENAME of `from` onto `to` (same authority), replacing `to` when `overwrite`.
  Status Rename(const ObjectUrl& from, const ObjectUrl& to, bool overwrite);

 private:
  // The NameNode URL of `op` on `path` (encoded here) with `query` (already encoded) appended.
  std::string NameNodeUrl(const ObjectUrl& url, std::string_view path, std::string_view op,
                          std::string_view query = {}) const;
  Result<internal::HttpResponse> Perform(internal::HttpRequest request, int max_attempts = 0);
  // The name excludedatanodes takes for the DataNode serving HTTP at `http_authority`: its data
  // transfer address IP:XFERPORT, looked up in the block locations of [offset, offset+length) of
  // `path`. The NameNode reads a bare host as "any DataNode on that host", so the HTTP authority
  // is only the fallback when the lookup fails.
  std::string ExcludeName(const ObjectUrl& url, const std::string& path, std::uint64_t offset,
                          std::uint64_t length, const std::string& http_authority);

  // ReadRange straight from the DataNodes. *fall_back: the range may still be read over WebHDFS
  // (the DataNodes want SASL, cannot be reached, or the gateway has no block locations).
  Status ReadDirect(const ObjectUrl& url, const std::string& version, std::uint64_t offset,
                    std::span<std::byte> out, bool* fall_back);
  // FailedPrecondition: the file of inode `version` is gone (`st` says how that showed).
  Status Replaced(const ObjectUrl& url, const std::string& version, const Status& st) const;

  HdfsConfig config_;
  std::unique_ptr<internal::HttpClient> http_;
  std::string client_name_;            // for the DataNodes' logs
  std::atomic<bool> direct_ok_{true};  // false once direct reads proved impossible here
  std::atomic<std::uint64_t> direct_bytes_{0}, webhdfs_bytes_{0};
};

// What a WebHDFS error answer says: RemoteException's exception and message, exposed for tests.
// Empty strings when the body is not such a document.
struct RemoteException {
  std::string exception;  // "FileNotFoundException"
  std::string message;
};
RemoteException ParseRemoteException(std::string_view body);

}  // namespace embstore::objstore

#endif  // EMBSTORE_OBJSTORE_WEBHDFS_H_
