// Netlink's NIC events, and the drained NICs.
#include "daemon/links/nic_events.h"

#include <sys/epoll.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace plexus::daemon {

std::string NicEvents::watch(int epoll_fd, uint64_t key) {
  if (monitor_) return {};
  try {
    monitor_ = std::make_unique<transports::LinkMonitor>();
  } catch (const std::exception& e) {
    return e.what();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = key;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, monitor_->fd(), &ev) != 0) {
    const std::string why = std::string("epoll_ctl: ") + std::strerror(errno);
    monitor_.reset();
    return why;
  }
  return {};
}

void NicEvents::on_readable() {
  for (const transports::LinkEvent& event : monitor_->read_changes()) {
    if (event.up) {
      spdlog::info("NIC {} is up", event.nic);
      if (hooks_.nic_up) hooks_.nic_up(event.nic);
      continue;
    }
    hooks_.nic_down(event.nic,
                    event.removed ? "was removed" : "went down (set down, or no carrier)");
  }
}

void NicEvents::set_drained(const std::string& nic, bool drained) {
  if (drained) {
    drained_.insert(nic);
  } else {
    drained_.erase(nic);
  }
}

}  // namespace plexus::daemon
