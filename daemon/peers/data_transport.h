// What carries the data connections to peer daemons (plexusd --transport): TCP, RDMA (a
// queue pair on the verbs port of the NIC each connection is set up over; refused where one
// side has none), or auto: RDMA where both sides' NICs have a verbs device, TCP otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace plexus::daemon {

enum class DataTransport : uint8_t { kAuto, kTcp, kRdma };

constexpr std::string_view data_transport_name(DataTransport t) {
  switch (t) {
    case DataTransport::kTcp:
      return "tcp";
    case DataTransport::kRdma:
      return "rdma";
    case DataTransport::kAuto:
      break;
  }
  return "auto";
}

// The words --transport accepts.
inline std::map<std::string, DataTransport> data_transport_words() {
  return {
      {"auto", DataTransport::kAuto}, {"tcp", DataTransport::kTcp}, {"rdma", DataTransport::kRdma}};
}

}  // namespace plexus::daemon
