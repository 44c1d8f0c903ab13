#include "shm/unix_socket.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/unique_fd.h"

namespace plexus::shm {

sockaddr_un unix_socket_address(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    throw std::invalid_argument("socket path '" + path + "' must be 1 to " +
                                std::to_string(sizeof(addr.sun_path) - 1) + " bytes long");
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

bool unix_socket_answers(const std::string& path) {
  sockaddr_un addr{};
  try {
    addr = unix_socket_address(path);
  } catch (const std::invalid_argument&) {
    return false;
  }
  common::UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe) return false;
  int result;
  do {
    result = ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  } while (result != 0 && errno == EINTR);
  return result == 0;
}

}  // namespace plexus::shm
