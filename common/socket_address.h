// Socket addresses as text: "ip:port", "[ip]:port" for IPv6.
#pragma once

#include <sys/socket.h>

#include <string>

namespace plexus::common {

// An IPv4 or IPv6 socket address as "ip:port" ("[ip]:port" for IPv6).
std::string address_text(const sockaddr* address);
// "ip:port" or "[ip]:port" -> sockaddr; returns false when it is not one.
bool parse_address(const std::string& text, sockaddr_storage* out, socklen_t* len);

}  // namespace plexus::common
