// Netlink link messages: up needs IFF_UP and a carrier, RTM_DELLINK is a removal, other
// messages and malformed ones are skipped without reading past the buffer; and, in a
// network namespace of its own, a live LinkMonitor reports a veth NIC going up and down.
#include "transports/netlink/link_monitor.h"

#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace plexus::transports {
namespace {

// One RTM_*LINK message for interface `name` with `flags`.
std::vector<std::byte> link_message(uint16_t type, unsigned flags, const std::string& name) {
  const size_t attr_bytes = RTA_LENGTH(name.size() + 1);
  const size_t total = NLMSG_LENGTH(NLMSG_ALIGN(sizeof(ifinfomsg)) + RTA_ALIGN(attr_bytes));
  std::vector<std::byte> out(NLMSG_ALIGN(total));
  nlmsghdr header{};
  header.nlmsg_len = static_cast<uint32_t>(total);
  header.nlmsg_type = type;
  // GCC 12's Release build warns -Wnull-dereference on memcpy into data() unless it sees
  // the pointer checked (the message is never empty).
  std::byte* const base = out.data();
  if (base == nullptr) return out;
  std::memcpy(base, &header, sizeof(header));
  ifinfomsg info{};
  info.ifi_flags = flags;
  std::memcpy(base + NLMSG_HDRLEN, &info, sizeof(info));
  rtattr attr{};
  attr.rta_len = static_cast<uint16_t>(attr_bytes);
  attr.rta_type = IFLA_IFNAME;
  std::byte* at = base + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ifinfomsg));
  std::memcpy(at, &attr, sizeof(attr));
  std::memcpy(at + RTA_LENGTH(0), name.c_str(), name.size() + 1);
  return out;
}

TEST(LinkMonitorTest, UpNeedsAdminUpAndCarrierAndDelLinkIsARemoval) {
  std::vector<std::byte> buffer;
  for (auto part : {link_message(RTM_NEWLINK, IFF_UP | IFF_LOWER_UP, "eth0"),
                    link_message(RTM_NEWLINK, IFF_UP, "eth1"),
                    link_message(RTM_NEWADDR, IFF_UP | IFF_LOWER_UP, "eth2"),
                    link_message(RTM_DELLINK, IFF_UP | IFF_LOWER_UP, "eth3")}) {
    buffer.insert(buffer.end(), part.begin(), part.end());
  }
  const auto events = parse_link_messages(buffer);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].nic, "eth0");
  EXPECT_TRUE(events[0].up);
  EXPECT_EQ(events[1].nic, "eth1");
  EXPECT_FALSE(events[1].up);  // no carrier
  EXPECT_EQ(events[2].nic, "eth3");
  EXPECT_TRUE(events[2].removed);
  EXPECT_FALSE(events[2].up);
}

TEST(LinkMonitorTest, MalformedMessagesAreSkippedWithoutReadingPastTheBuffer) {
  auto good = link_message(RTM_NEWLINK, IFF_UP | IFF_LOWER_UP, "eth0");
  for (size_t cut = 0; cut < good.size(); ++cut) {
    // Every truncation: no event from the partial message, and no read past `cut` (ASan).
    std::vector<std::byte> partial(good.begin(), good.begin() + static_cast<long>(cut));
    EXPECT_TRUE(parse_link_messages(partial).empty()) << "cut at " << cut;
  }
  auto lying = good;
  nlmsghdr header;
  std::memcpy(&header, lying.data(), sizeof(header));
  header.nlmsg_len = 1 << 20;  // longer than the buffer
  std::memcpy(lying.data(), &header, sizeof(header));
  EXPECT_TRUE(parse_link_messages(lying).empty());
  // A last message whose length is not a multiple of 4: aligning it steps past the end.
  std::vector<std::byte> odd(good.begin(), good.begin() + sizeof(nlmsghdr) + 1);
  header.nlmsg_len = sizeof(nlmsghdr) + 1;
  std::memcpy(odd.data(), &header, sizeof(header));
  EXPECT_TRUE(parse_link_messages(odd).empty());
}

TEST(LinkMonitorTest, ReportsAVethNicGoingUpAndDownInItsOwnNamespace) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to create a network namespace and a NIC";
  if (std::system("command -v ip > /dev/null") != 0) GTEST_SKIP() << "needs iproute2 (ip)";
  // A child in a new network namespace, so that no interface of the host is touched.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::unshare(CLONE_NEWNET) != 0) ::_exit(10);
    LinkMonitor monitor;
    if (std::system("ip link add pxveth0 type veth peer name pxveth1 && ip link set pxveth1 up && "
                    "ip link set pxveth0 up") != 0)
      _exit(11);
    auto wait_for = [&](bool up) {
      for (int i = 0; i < 200; ++i) {
        for (const auto& e : monitor.read_changes()) {
          if (e.nic == "pxveth0" && e.up == up) return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      return false;
    };
    if (!wait_for(true)) ::_exit(12);
    if (std::system("ip link set pxveth0 down") != 0) ::_exit(13);
    if (!wait_for(false)) ::_exit(14);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 10) GTEST_SKIP() << "unshare(CLONE_NEWNET) refused here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 unshare, 11 ip link add, 12 no up event, 13 ip link "
                                       "set down, 14 no down event";
}

}  // namespace
}  // namespace plexus::transports
