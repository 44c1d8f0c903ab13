// Local NIC state from the kernel's routing netlink (RTNLGRP_LINK): an interface that goes
// down or loses its carrier is reported as it happens, so the paths over it fail at once
// instead of after the path timeout, and one that comes back is reported too (its paths
// are reconnected without waiting out the backoff).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.h"

namespace plexus::transports {

struct LinkEvent {
  std::string nic;
  bool up = false;  // administratively up and with a carrier (IFF_UP and IFF_LOWER_UP)
  bool removed = false;
};

// Parses a buffer of netlink messages as read from a NETLINK_ROUTE socket; messages other
// than RTM_NEWLINK/RTM_DELLINK, and malformed ones, are skipped.
std::vector<LinkEvent> parse_link_messages(std::span<const std::byte> messages);

class LinkMonitor {
 public:
  // Subscribes to RTNLGRP_LINK; throws std::system_error when the kernel refuses.
  LinkMonitor();
  int fd() const { return fd_.get(); }
  // Reads what is pending (non-blocking) and returns only the changes: an interface seen
  // for the first time is reported once, then only when its up state flips.
  std::vector<LinkEvent> read_changes();

 private:
  common::UniqueFd fd_;
  std::unordered_map<std::string, bool> up_;
  std::vector<std::byte> buffer_;
};

}  // namespace plexus::transports
