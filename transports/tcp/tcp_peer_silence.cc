// The smaller of the kernel's "since the last data" and "since the last acknowledgement".
#include "transports/tcp/tcp_peer_silence.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

namespace plexus::transports {

int64_t tcp_peer_silence_ms(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return std::min<int64_t>(info.tcpi_last_data_recv, info.tcpi_last_ack_recv);
}

}  // namespace plexus::transports
