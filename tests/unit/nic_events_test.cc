// The local NICs as the links see them (daemon/links/nic_events.h): the drained set, and
// netlink's subscription joining the links' epoll set once.
#include "daemon/links/nic_events.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace plexus::daemon {
namespace {

NicEvents quiet() {
  return NicEvents(NicEvents::Hooks{
      .nic_down = [](const std::string&, const std::string&) {},
      .nic_up = nullptr,
  });
}

TEST(NicEventsTest, DrainedNicsAreKeptInOrderUntilUndrained) {
  NicEvents nics = quiet();
  EXPECT_FALSE(nics.drained("rail1"));
  nics.set_drained("rail1", true);
  nics.set_drained("rail0", true);
  nics.set_drained("rail0", true);
  EXPECT_TRUE(nics.drained("rail1"));
  EXPECT_EQ(nics.drained_list(), (std::vector<std::string>{"rail0", "rail1"}));
  nics.set_drained("rail1", false);
  EXPECT_FALSE(nics.drained("rail1"));
  EXPECT_EQ(nics.drained_list(), std::vector<std::string>{"rail0"});
}

TEST(NicEventsTest, WatchingJoinsTheEpollSetOnceAndNothingIsReadWhileNoNicChanges) {
  NicEvents nics = quiet();
  EXPECT_FALSE(nics.watching());
  const int epoll = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(epoll, 0);
  const std::string why = nics.watch(epoll, 0);
  if (!why.empty()) {
    ::close(epoll);
    GTEST_SKIP() << "no netlink here: " << why;
  }
  EXPECT_TRUE(nics.watching());
  EXPECT_EQ(nics.watch(epoll, 0), "");  // once
  epoll_event ev{};
  EXPECT_EQ(::epoll_wait(epoll, &ev, 1, 0), 0);
  ::close(epoll);
}

TEST(NicEventsTest, AnEpollSetThatRefusesItIsNamedAndNothingIsWatched) {
  NicEvents nics = quiet();
  const std::string why = nics.watch(-1, 0);
  if (why.find("epoll_ctl") == std::string::npos) GTEST_SKIP() << "no netlink here: " << why;
  EXPECT_FALSE(nics.watching());
}

}  // namespace
}  // namespace plexus::daemon
