#include "shm/memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <utility>

namespace plexus::shm {

Mapping::Mapping(Mapping&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    reset();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void Mapping::reset() {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
}

common::UniqueFd create_sealed_memfd(const char* debug_name, size_t bytes) {
  common::UniqueFd fd(::memfd_create(debug_name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) throw std::system_error(errno, std::generic_category(), "memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    throw std::system_error(errno, std::generic_category(),
                            "ftruncate of memfd to " + std::to_string(bytes) + " bytes");
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    throw std::system_error(errno, std::generic_category(), "sealing memfd");
  }
  return fd;
}

Mapping map_shared(int fd, size_t bytes) {
  void* base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(),
                            "mmap of " + std::to_string(bytes) + " bytes");
  }
  return Mapping(base, bytes);
}

common::Result<uint64_t> check_sealed_memfd(int fd, uint64_t min_bytes, uint64_t max_bytes) {
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return common::fail("the descriptor is not a sealable memfd (F_GET_SEALS failed: " +
                        std::system_category().message(errno) + ")");
  }
  if ((seals & F_SEAL_SHRINK) == 0)
    return common::fail("the memfd is not sealed against shrinking (F_SEAL_SHRINK)");
  if ((seals & F_SEAL_GROW) == 0)
    return common::fail("the memfd is not sealed against growing (F_SEAL_GROW)");
  if ((seals & F_SEAL_SEAL) == 0)
    return common::fail("the memfd's seals are not final (F_SEAL_SEAL missing)");
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return common::fail("fstat of the memfd failed: " + std::system_category().message(errno));
  auto bytes = static_cast<uint64_t>(st.st_size);
  if (bytes < min_bytes) {
    return common::fail("the memfd holds " + std::to_string(bytes) + " bytes but " +
                        std::to_string(min_bytes) + " were declared");
  }
  if (bytes > max_bytes) {
    return common::fail("the memfd holds " + std::to_string(bytes) +
                        " bytes, more than the daemon's limit of " + std::to_string(max_bytes));
  }
  return bytes;
}

}  // namespace plexus::shm
