#include "transports/tcp/tcp_congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace plexus::transports {

namespace {

std::string available() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_available_congestion_control");
  std::string list;
  std::getline(in, list);
  return list.empty() ? "unknown" : list;
}

}  // namespace

std::string set_congestion_control(int fd, const std::string& name) {
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                   static_cast<socklen_t>(name.size())) == 0) {
    return {};
  }
  const int error = errno;
  const std::string why = error == ENOENT ? "not in this kernel" : std::strerror(error);
  return "TCP congestion control '" + name + "': " + why + " (this kernel has: " + available() +
         ")";
}

std::string congestion_control(int fd) {
  char name[32] = {};
  socklen_t len = sizeof(name);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return {};
  return std::string(name, strnlen(name, len));
}

}  // namespace plexus::transports
