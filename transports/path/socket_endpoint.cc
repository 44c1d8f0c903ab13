#include "transports/path/socket_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "common/socket_address.h"

namespace plexus::transports {

PathEndpoint socket_endpoint(int fd, bool remote) {
  sockaddr_storage address{};
  socklen_t len = sizeof(address);
  const int rc = remote ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &len)
                        : ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &len);
  if (rc != 0) return {};
  uint64_t key = 0;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    key = static_cast<uint64_t>(ntohl(in->sin_addr.s_addr)) << 16 | ntohs(in->sin_port);
  }
  return {common::address_text(reinterpret_cast<const sockaddr*>(&address)), key};
}

}  // namespace plexus::transports
