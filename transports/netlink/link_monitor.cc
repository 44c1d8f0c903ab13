// RTNLGRP_LINK subscription and RTM_NEWLINK/RTM_DELLINK parsing.
#include "transports/netlink/link_monitor.h"

#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace plexus::transports {

std::vector<LinkEvent> parse_link_messages(std::span<const std::byte> messages) {
  std::vector<LinkEvent> events;
  size_t at = 0;
  // `at` may step past the end (alignment of the last message): checked before subtracting.
  while (at <= messages.size() && messages.size() - at >= sizeof(nlmsghdr)) {
    nlmsghdr header;
    std::memcpy(&header, messages.data() + at, sizeof(header));
    if (header.nlmsg_len < sizeof(nlmsghdr) || header.nlmsg_len > messages.size() - at) break;
    const std::byte* body = messages.data() + at + NLMSG_HDRLEN;
    const size_t body_bytes = header.nlmsg_len - NLMSG_HDRLEN;
    if ((header.nlmsg_type == RTM_NEWLINK || header.nlmsg_type == RTM_DELLINK) &&
        body_bytes >= sizeof(ifinfomsg)) {
      ifinfomsg info;
      std::memcpy(&info, body, sizeof(info));
      LinkEvent event;
      event.removed = header.nlmsg_type == RTM_DELLINK;
      event.up =
          !event.removed && (info.ifi_flags & IFF_UP) != 0 && (info.ifi_flags & IFF_LOWER_UP) != 0;
      // Attributes: each an rtattr (length, type) and its value, 4-byte aligned.
      size_t a = NLMSG_ALIGN(sizeof(ifinfomsg));
      while (body_bytes >= a + sizeof(rtattr)) {
        rtattr attr;
        std::memcpy(&attr, body + a, sizeof(attr));
        if (attr.rta_len < sizeof(rtattr) || attr.rta_len > body_bytes - a) break;
        if (attr.rta_type == IFLA_IFNAME) {
          const char* name = reinterpret_cast<const char*>(body + a + RTA_LENGTH(0));
          const size_t most = attr.rta_len - RTA_LENGTH(0);
          event.nic.assign(name, strnlen(name, most));
        }
        a += RTA_ALIGN(attr.rta_len);
      }
      if (!event.nic.empty()) events.push_back(std::move(event));
    }
    at += NLMSG_ALIGN(header.nlmsg_len);
  }
  return events;
}

LinkMonitor::LinkMonitor()
    : fd_(::socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE)),
      buffer_(64 * 1024) {
  if (!fd_) throw std::system_error(errno, std::generic_category(), "netlink socket");
  sockaddr_nl address{};
  address.nl_family = AF_NETLINK;
  address.nl_groups = RTMGRP_LINK;
  if (::bind(fd_.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    throw std::system_error(errno, std::generic_category(), "netlink bind to RTNLGRP_LINK");
  }
}

std::vector<LinkEvent> LinkMonitor::read_changes() {
  std::vector<LinkEvent> changes;
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t n = ::recv(fd_.get(), buffer_.data(), buffer_.size(), 0);
    if (n < 0) {
      // ENOBUFS: the kernel dropped events while we were busy; the next ones still come,
      // and a path over a NIC that went down meanwhile fails by its timeout.
      if (errno == EINTR || errno == ENOBUFS) continue;
      break;
    }
    if (n == 0) break;
    for (LinkEvent& event :
         parse_link_messages(std::span(buffer_.data(), static_cast<size_t>(n)))) {
      if (event.removed) {
        up_.erase(event.nic);
        changes.push_back(std::move(event));
        continue;
      }
      auto [it, first] = up_.try_emplace(event.nic, event.up);
      if (!first && it->second == event.up) continue;
      it->second = event.up;
      changes.push_back(std::move(event));
    }
  }
  return changes;
}

}  // namespace plexus::transports
