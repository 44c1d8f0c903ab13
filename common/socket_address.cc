#include "common/socket_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace plexus::common {

std::string address_text(const sockaddr* sa) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
  // Appended rather than "[" + std::string(...): GCC 12 warns (-Wrestrict, a false
  // positive in its inlined operator+(const char*, string&&)) in Release builds.
  std::string text = "[";
  text += host;
  text += "]:";
  text += std::to_string(ntohs(in6->sin6_port));
  return text;
}

bool parse_address(const std::string& text, sockaddr_storage* out, socklen_t* len) {
  std::memset(out, 0, sizeof(*out));
  std::string host;
  std::string port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find("]:");
    if (close == std::string::npos) return false;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos) return false;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit)) {
    return false;
  }
  const unsigned long p = std::stoul(port);
  if (p > 65535) return false;
  auto* in = reinterpret_cast<sockaddr_in*>(out);
  if (::inet_pton(AF_INET, host.c_str(), &in->sin_addr) == 1) {
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(p));
    *len = sizeof(sockaddr_in);
    return true;
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(out);
  if (::inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(p));
    *len = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

}  // namespace plexus::common
