// The local NICs as the links see them: which are drained here (plexusctl nic drain), and
// netlink's word of a NIC going down or up (transports/netlink/link_monitor.h), passed on
// through hooks. Owns the drained set and the netlink subscription; what a NIC's state does to
// the paths over it is PeerLinks' (peer_links_nics.cc). Engine thread only.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "transports/netlink/link_monitor.h"

namespace plexus::daemon {

class NicEvents {
 public:
  struct Hooks {
    // Local NIC `nic` went down or was removed (`how`, for messages).
    std::function<void(const std::string& nic, const std::string& how)> nic_down;
    // Local NIC `nic` is up again.
    std::function<void(const std::string& nic)> nic_up;
  };
  explicit NicEvents(Hooks hooks) : hooks_(std::move(hooks)) {}

  // Follows NICs going down and up: the subscription's socket joins `epoll_fd` under `key`,
  // and on_readable() is to be called when it is readable. Returns "" or why it cannot.
  std::string watch(int epoll_fd, uint64_t key);
  bool watching() const { return monitor_ != nullptr; }
  // Reads what netlink reported and calls the hooks.
  void on_readable();

  void set_drained(const std::string& nic, bool drained);
  bool drained(const std::string& nic) const { return drained_.count(nic) != 0; }
  std::vector<std::string> drained_list() const { return {drained_.begin(), drained_.end()}; }

 private:
  Hooks hooks_;
  std::unique_ptr<transports::LinkMonitor> monitor_;
  std::set<std::string> drained_;
};

}  // namespace plexus::daemon
