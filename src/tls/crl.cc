// Implementation of src/tls/crl.h.
#include "tls/crl.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ferry::tls {
namespace {

CrlDirectory::Set make_set() {
  return CrlDirectory::Set(sk_X509_CRL_new_null(),
                           [](STACK_OF(X509_CRL) * s) { sk_X509_CRL_pop_free(s, X509_CRL_free); });
}

std::vector<std::filesystem::path> files_of(const std::string& dir, std::error_code& ec) {
  std::vector<std::filesystem::path> files;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Reads every PEM CRL of a file into set: how many, or -1 when the file cannot be read.
int read_crls(const std::filesystem::path& file, STACK_OF(X509_CRL) * set) {
  BIO* bio = BIO_new_file(file.c_str(), "r");
  if (bio == nullptr) return -1;
  int n = 0;
  while (X509_CRL* crl = PEM_read_bio_X509_CRL(bio, nullptr, nullptr, nullptr)) {
    sk_X509_CRL_push(set, crl);
    ++n;
  }
  ERR_clear_error();  // the end of the file reads as "no start line"
  BIO_free(bio);
  return n;
}

// The index of SSL_CTX ex_data that owns a context's CrlDirectory: freed with the context, so
// that a handshake still running on a rotated-away context keeps its CRLs.
int owner_index() {
  static const int index = SSL_CTX_get_ex_new_index(
      0, nullptr, nullptr, nullptr, [](void*, void* owned, CRYPTO_EX_DATA*, int, long, void*) {
        delete static_cast<std::shared_ptr<CrlDirectory>*>(owned);
      });
  return index;
}

// SSL_CTX_set_cert_verify_callback: the chain verified as OpenSSL would, with the CRLs in force
// for this handshake and CRL checks for every certificate of the chain.
int verify_with_crls(X509_STORE_CTX* ctx, void* arg) {
  CrlDirectory::Set crls = static_cast<CrlDirectory*>(arg)->current();
  X509_STORE_CTX_set0_crls(ctx, crls.get());
  X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx),
                              X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
  const int ok = X509_verify_cert(ctx);
  X509_STORE_CTX_set0_crls(ctx, nullptr);  // crls may go once this returns
  return ok;
}

// The verify callback: revocation undetermined (no CRL for an issuer, or one out of its dates)
// passes, as gRFC A69 has it by default; every other verdict stands.
int allow_undetermined(int ok, X509_STORE_CTX* ctx) {
  if (ok == 1) return 1;
  switch (X509_STORE_CTX_get_error(ctx)) {
    case X509_V_ERR_UNABLE_TO_GET_CRL:
    case X509_V_ERR_CRL_HAS_EXPIRED:
    case X509_V_ERR_CRL_NOT_YET_VALID:
      X509_STORE_CTX_set_error(ctx, X509_V_OK);
      return 1;
    default:
      return 0;
  }
}

}  // namespace

CrlDirectory::CrlDirectory(std::string path, std::chrono::milliseconds refresh)
    : path_(std::move(path)), refresh_(refresh), crls_(make_set()) {}

absl::Status CrlDirectory::fingerprint(std::string& out) const {
  std::error_code ec;
  out.clear();
  for (const std::filesystem::path& file : files_of(path_, ec)) {
    std::error_code stat_ec;
    const auto size = std::filesystem::file_size(file, stat_ec);
    const auto time = std::filesystem::last_write_time(file, stat_ec);
    absl::StrAppend(&out, file.filename().string(), "/", size, "/", time.time_since_epoch().count(),
                    "\n");
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS: cannot read the CRL directory ", path_, ": ", ec.message()));
  }
  return absl::OkStatus();
}

absl::Status CrlDirectory::load() {
  std::string print;
  if (absl::Status s = fingerprint(print); !s.ok()) return s;
  std::error_code ec;
  Set set = make_set();
  for (const std::filesystem::path& file : files_of(path_, ec)) {
    const int n = read_crls(file, set.get());
    if (n <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS: ", n < 0 ? "cannot read " : "no PEM CRL in ", file.string()));
    }
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS: cannot read the CRL directory ", path_, ": ", ec.message()));
  }
  std::lock_guard lock(mu_);
  crls_ = std::move(set);
  fingerprint_ = std::move(print);
  next_check_ = std::chrono::steady_clock::now() + refresh_;
  return absl::OkStatus();
}

CrlDirectory::Set CrlDirectory::current() {
  {
    std::lock_guard lock(mu_);
    if (std::chrono::steady_clock::now() < next_check_) return crls_;
    next_check_ = std::chrono::steady_clock::now() + refresh_;  // one thread looks; others go on
  }
  std::string print;
  if (absl::Status s = fingerprint(print); s.ok()) {
    bool changed;
    {
      std::lock_guard lock(mu_);
      changed = print != fingerprint_;
    }
    if (changed) {
      if (absl::Status loaded = load(); !loaded.ok()) {
        std::fprintf(stderr, "ferry: CRLs not reloaded, the previous ones stay in force: %s\n",
                     std::string(loaded.message()).c_str());
        std::lock_guard lock(mu_);
        fingerprint_ = std::move(print);  // said once per change, not at every look
      }
    }
  } else {
    std::fprintf(stderr, "ferry: CRLs not reloaded, the previous ones stay in force: %s\n",
                 std::string(s.message()).c_str());
  }
  std::lock_guard lock(mu_);
  return crls_;
}

void check_revocation(SSL_CTX* ctx, int verify_mode, std::shared_ptr<CrlDirectory> crls) {
  CrlDirectory* raw = crls.get();
  SSL_CTX_set_ex_data(ctx, owner_index(), new std::shared_ptr<CrlDirectory>(std::move(crls)));
  SSL_CTX_set_cert_verify_callback(ctx, verify_with_crls, raw);
  SSL_CTX_set_verify(ctx, verify_mode, allow_undetermined);
}

}  // namespace ferry::tls
