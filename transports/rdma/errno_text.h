// How an RDMA path names a call that failed: the call, then what the error number means
// (the path's error message, which the links log and plexusctl shows).
#pragma once

#include <cstring>
#include <string>

namespace plexus::transports::rdma {

inline std::string errno_text(const std::string& call, int err) {
  return call + ": " + std::strerror(err);
}

}  // namespace plexus::transports::rdma
