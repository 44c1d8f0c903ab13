// Loading the cluster secret file and computing HMAC-SHA256 with OpenSSL's libcrypto.
#include "transports/peer/cluster_secret.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace plexus::transports {
namespace {

constexpr size_t kMinSecretBytes = 16;
constexpr size_t kMaxSecretBytes = 4096;

}  // namespace

ClusterSecret ClusterSecret::load(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    throw std::runtime_error("cluster secret file " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  ::fstat(fd, &st);
  auto fail = [&](const std::string& why) {
    ::close(fd);
    return std::runtime_error("cluster secret file " + path + ": " + why);
  };
  if (!S_ISREG(st.st_mode)) throw fail("not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw fail("mode " + std::string(mode) +
               " lets group or others read or change it; chmod 600 it");
  }
  std::vector<uint8_t> bytes(kMaxSecretBytes + 1);
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw fail(std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > kMaxSecretBytes) {
    throw std::runtime_error("cluster secret file " + path + ": longer than " +
                             std::to_string(kMaxSecretBytes) + " bytes");
  }
  bytes.resize(got);
  if (!bytes.empty() && bytes.back() == '\n') bytes.pop_back();
  if (bytes.size() < kMinSecretBytes) {
    throw std::runtime_error("cluster secret file " + path + ": holds " +
                             std::to_string(bytes.size()) + " bytes, at least " +
                             std::to_string(kMinSecretBytes) + " are needed");
  }
  return from_bytes(std::move(bytes));
}

ClusterSecret ClusterSecret::from_bytes(std::vector<uint8_t> bytes) {
  ClusterSecret secret;
  secret.key_ = std::move(bytes);
  return secret;
}

Mac ClusterSecret::mac(std::span<const std::byte> data) const {
  Mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
  return out;
}

bool macs_equal(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace plexus::transports
