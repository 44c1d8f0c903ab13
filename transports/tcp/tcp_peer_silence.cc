// The smaller of the kernel's "since the last data" and "since the last acknowledgement",
// or none while the peer advertises a zero window. Only <linux/tcp.h> has tcpi_snd_wnd
// (glibc's struct tcp_info stops short of it), and it cannot be included with
// <netinet/tcp.h>.
#include "transports/tcp/tcp_peer_silence.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>

namespace plexus::transports {

int64_t tcp_peer_silence_ms(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  // A peer whose receive window is full is alive but not reading (its daemon is held up):
  // the kernel then only probes, at intervals that grow past any path timeout.
  if (len >= offsetof(tcp_info, tcpi_snd_wnd) + sizeof(info.tcpi_snd_wnd) &&
      info.tcpi_snd_wnd == 0) {
    return 0;
  }
  return std::min<int64_t>(info.tcpi_last_data_recv, info.tcpi_last_ack_recv);
}

bool tcp_peer_acknowledged_all(int fd) {
  tcp_info info{};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  return info.tcpi_unacked == 0;
}

}  // namespace plexus::transports
