// Certificate revocation lists from a directory (tls module, private; gRFC A69's directory
// provider): the CRLs a credentials' OpenSSL context checks each peer's chain against, reloaded
// when the directory's files change, and the verification hooks that apply them. Used by
// src/tls/credentials.cc, on both ends.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace ferry::tls {

// The CRLs of one directory: every regular file in it, each holding one or more PEM CRLs.
// Thread-safe: any I/O thread's handshake calls current().
class CrlDirectory {
 public:
  using Set = std::shared_ptr<STACK_OF(X509_CRL)>;

  CrlDirectory(std::string path, std::chrono::milliseconds refresh);

  // Reads the directory now: INVALID_ARGUMENT naming the directory or the file that could not
  // be read or holds no CRL.
  absl::Status load();
  // The CRLs in force. At most once per refresh interval, it looks whether the directory's
  // files changed (names, sizes, modification times: a few stat calls) and if so reloads them;
  // a reload that fails keeps the previous set and says why on stderr.
  Set current();

 private:
  // What the directory holds, to see a change: each file's name, size and modification time.
  absl::Status fingerprint(std::string& out) const;

  const std::string path_;
  const std::chrono::milliseconds refresh_;
  std::mutex mu_;
  Set crls_;
  std::string fingerprint_;
  std::chrono::steady_clock::time_point next_check_;
};

// Makes ctx check each peer's chain against crls (every certificate but the trust anchor, as
// X509_V_FLAG_CRL_CHECK_ALL does): a revoked one fails the handshake ("certificate revoked");
// a chain whose issuer has no CRL here, or whose CRL has expired or is not yet valid, passes
// (gRFC A69: revocation undetermined is allowed), but a certificate such a CRL lists is still
// refused. verify_mode is what SSL_CTX_set_verify would be given. ctx keeps crls alive.
void check_revocation(SSL_CTX* ctx, int verify_mode, std::shared_ptr<CrlDirectory> crls);

}  // namespace ferry::tls
