#include "grpc_util.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <absl/base/internal/cycleclock.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "embstore/common/address.h"
#include "embstore/common/ca_bundle.h"
#include "embstore/common/malloc_settings.h"
#include "embstore/common/read_file.h"

namespace embstore::client::internal {

// gRPC reads the socket into buffers of up to 4 MiB that it allocates and frees for every
// read. glibc's default thresholds return that memory to the kernel almost at once (it raises
// them only as far as twice the largest block freed so far), so every read faults its pages in
// again, zeroed, under the address-space lock the other streams and the destination's page
// faults take too: about 230 MB of page faults in a load of the 480 MB seed table, and a third
// of its system time. These are the highest values glibc's own adaptive thresholds reach
// (mmap above 32 MiB, trim beyond 64 MiB free), set at once: the receive buffers then come
// from freed memory, and a process that had already reached that state sees no change.
// MALLOC_ARENA_* and the like are left alone; so is everything when the user set glibc's
// thresholds (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES), and another
// allocator (jemalloc, tcmalloc) never sees these calls' effect. EMBSTORE_MALLOC_TUNING=0 opts out.
void KeepReceiveBuffersForReuse() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    const char* opt = std::getenv("EMBSTORE_MALLOC_TUNING");
    if (opt != nullptr && std::strcmp(opt, "0") == 0) return;
    if (MallocThresholdsSetByOperator()) return;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
  });
#endif
}

// gRPC 1.51's TCP connect (iomgr tcp_client_posix.cc) calls connect(), then names the address
// and registers the socket with the poller, and only then reads errno to tell "in progress" from
// "failed". Anything in between that sets errno turns a connect in progress into a failure with
// that errno. absl does, once per process: the first thread that queues on a contended
// absl::Mutex reads the CPU's cycle-clock frequency, and where
// /sys/devices/system/cpu/cpu0/tsc_freq_khz does not exist (most x86 machines) the failed open()
// leaves ENOENT behind. When that first time falls inside a connect (parallel streams connecting
// at once make it likely), one stream fails with "ipv4:127.0.0.1:PORT: No such file or
// directory" and resumes. Reading the frequency here, before any connection, leaves nothing for
// that first time to do.
void SettleClockBeforeConnecting() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int saved = errno;
    (void)absl::base_internal::CycleClock::Frequency();
    errno = saved;
  });
}

Status CheckTarget(const std::string& target) {
  return ParseAddress(target, AddressUse::kConnect, "server target").status();
}

Result<std::shared_ptr<grpc::ChannelCredentials>> MakeCredentials(const ConnectOptions& o,
                                                                   grpc::ChannelArguments* args) {
  if (!o.tls.enabled) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  if (!o.tls.ca_file.empty()) {
    EMBSTORE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadSmallFile(o.tls.ca_file, "TLS CA file"));
  } else if (std::getenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH") == nullptr) {
    // The host's CA bundle rather than gRPC's compiled-in roots.pem path, which a portable build
    // does not have (and which misses the CAs an operator added to the system's bundle).
    if (const std::string bundle = SystemCaBundle(); !bundle.empty()) {
      EMBSTORE_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadSmallFile(bundle, "system CA bundle"));
    }
  }
  if (!o.tls.cert_file.empty() || !o.tls.key_file.empty()) {
    if (o.tls.cert_file.empty() || o.tls.key_file.empty()) {
      return Status::InvalidArgument(
          "a TLS client certificate needs both a certificate and a key file (`tls.cert_file` "
          "and `tls.key_file`)");
    }
    EMBSTORE_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                              ReadSmallFile(o.tls.cert_file, "TLS certificate"));
    EMBSTORE_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadSmallFile(o.tls.key_file, "TLS key"));
  }
  if (!o.tls.server_name.empty()) args->SetSslTargetNameOverride(o.tls.server_name);
  return grpc::SslCredentials(ssl);
}

Status FromGrpc(const grpc::Status& s, const std::string& target) {
  std::string msg = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
      return Status::OK();
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(msg);
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(msg);
    case grpc::StatusCode::OUT_OF_RANGE:
      return Status::OutOfRange(msg);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(msg);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(msg);
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status::PermissionDenied(msg);
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status::Unauthenticated("server '" + target + "' refused the credentials: " + msg);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded("server '" + target + "': deadline exceeded: " + msg);
    case grpc::StatusCode::CANCELLED:
      return Status::Cancelled(msg);
    case grpc::StatusCode::DATA_LOSS:
      return Status::Corruption("server '" + target + "': " + msg);
    case grpc::StatusCode::UNIMPLEMENTED:
      return Status::Unimplemented(msg);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::ABORTED:
      return Status::Unavailable("cannot reach embstore server at '" + target + "': " + msg);
    default:
      return Status::Internal("server '" + target + "': " + msg);
  }
}

bool Transient(grpc::StatusCode c) {
  return c == grpc::StatusCode::UNAVAILABLE || c == grpc::StatusCode::ABORTED ||
         c == grpc::StatusCode::INTERNAL || c == grpc::StatusCode::UNKNOWN ||
         c == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

void PrepareContext(grpc::ClientContext* ctx, const ConnectOptions& o,
                    std::optional<std::chrono::steady_clock::time_point> deadline, bool unary) {
  if (!o.token.empty()) ctx->AddMetadata("authorization", "Bearer " + o.token);
  // gRPC takes system_clock deadlines; embstore keeps steady_clock ones (immune to clock jumps).
  auto remaining = deadline ? *deadline - std::chrono::steady_clock::now()
                            : std::chrono::steady_clock::duration(o.rpc_timeout);
  if (deadline || (unary && o.rpc_timeout.count() > 0)) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(remaining));
  }
}

}  // namespace embstore::client::internal
