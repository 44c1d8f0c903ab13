// Two peer servers on loopback sockets in one loop (daemon/peers/peer_server.h and its
// parts): control messages delivered both ways over one connection, a data connection
// authenticated and handed off on both sides, a peer where no daemon listens given up
// as gone, for control and for data (at once, even while a communicator forms with it), a
// forming peer whose daemon answers only later still linked, the listener's backlog, and a
// quiet control connection closed by its opener with no loss on either side, opened again
// by the next message either way (delivered once), and kept while a join waits on the peer.
#include "daemon/peers/peer_server.h"

#include <arpa/inet.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace plexus::daemon {
namespace {

using namespace std::chrono_literals;

// What one server's callbacks saw.
struct Heard {
  std::vector<std::pair<uint64_t, std::string>> messages;  // sender, text
  std::vector<uint64_t> links;                             // peers, per data connection
  std::vector<std::pair<uint64_t, bool>> control_lost;     // instance, gone
  std::vector<std::pair<uint64_t, std::string>> data_failed;
};

class PeerServerTest : public ::testing::Test {
 protected:
  void SetUp() override { uv_loop_init(&loop_); }
  void TearDown() override {
    for (auto& server : servers_) server->close();
    uv_run(&loop_, UV_RUN_DEFAULT);
    servers_.clear();
    EXPECT_EQ(uv_loop_close(&loop_), 0);
  }

  PeerServer& start(uint64_t instance, Heard& heard, const std::string& listen = "127.0.0.1:0") {
    transports::PeerIdentity me;
    me.instance_id = instance;
    me.node_name = "node" + std::to_string(instance);
    PeerServer::Settings settings;
    settings.reconnect_max = 100ms;
    settings.control_ack_timeout = 2000ms;
    settings.control_grace = 500ms;
    settings.backlog = backlog_;
    settings.handshake_timeout = handshake_timeout_;
    settings.control_idle_close = control_idle_close_;
    PeerServer::Callbacks callbacks;
    callbacks.on_control = [&heard](const transports::PeerIdentity& peer,
                                    kj::Array<capnp::word> words) {
      capnp::FlatArrayMessageReader reader(words);
      heard.messages.emplace_back(peer.instance_id,
                                  reader.getRoot<capnp::AnyPointer>().getAs<capnp::Text>().cStr());
    };
    callbacks.on_control_lost = [&heard](uint64_t id, const std::string&, const std::string&,
                                         bool gone) { heard.control_lost.emplace_back(id, gone); };
    callbacks.on_data_link = [&heard](const transports::PeerIdentity& peer, transports::PathOpener,
                                      const std::string&, bool, bool, const std::string&) {
      heard.links.push_back(peer.instance_id);  // the opener, dropped, closes its socket
    };
    callbacks.on_data_failed = [&heard](uint64_t id, const std::string& reason) {
      heard.data_failed.emplace_back(id, reason);
    };
    callbacks.control_busy = [this](uint64_t) { return busy_; };
    servers_.push_back(std::make_unique<PeerServer>(&loop_, std::move(me), nullptr,
                                                    std::move(settings), std::move(callbacks)));
    servers_.back()->listen(listen);
    return *servers_.back();
  }

  static void send_text(PeerServer& from, const PeerServer& to, const std::string& text) {
    capnp::MallocMessageBuilder message;
    message.getRoot<capnp::AnyPointer>().setAs<capnp::Text>(text);
    from.send_control(to.identity().instance_id, to.identity().addresses, message);
  }

  // Runs the loop until neither server holds a control connection open, or five seconds passed.
  bool until_both_closed(const PeerServer& a, const PeerServer& b) {
    return run_until(
        [&] { return a.open_control_connections() == 0 && b.open_control_connections() == 0; });
  }

  // Runs the loop until `done`, or five seconds passed.
  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline) uv_run(&loop_, UV_RUN_ONCE);
    return done();
  }

  uv_loop_t loop_{};
  std::vector<std::unique_ptr<PeerServer>> servers_;
  int backlog_ = PeerServer::Settings{}.backlog;
  std::chrono::milliseconds handshake_timeout_ = PeerServer::Settings{}.handshake_timeout;
  std::chrono::milliseconds control_idle_close_{0};
  bool busy_ = false;
};

// "127.0.0.1:PORT" where nothing listens (a port bound, then closed).
std::string closed_address() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

TEST_F(PeerServerTest, ControlMessagesGoBothWaysAndADataConnectionIsHandedOffOnBothSides) {
  Heard heard_a;
  Heard heard_b;
  PeerServer& a = start(0xA, heard_a);
  PeerServer& b = start(0xB, heard_b);
  ASSERT_EQ(b.identity().addresses.size(), 1u);

  send_text(a, b, "join");
  send_text(a, b, "again");
  ASSERT_TRUE(run_until([&] { return heard_b.messages.size() == 2; }));
  EXPECT_EQ(heard_b.messages[0], std::make_pair(uint64_t{0xA}, std::string("join")));
  EXPECT_EQ(heard_b.messages[1].second, "again");
  ASSERT_NE(b.control_peer(0xA), nullptr);
  EXPECT_EQ(b.control_peer(0xA)->node_name, "node10");

  send_text(b, a, "welcome");  // on the connection A opened
  ASSERT_TRUE(run_until([&] { return heard_a.messages.size() == 1; }));
  EXPECT_EQ(heard_a.messages[0], std::make_pair(uint64_t{0xB}, std::string("welcome")));
  EXPECT_GT(a.control_round_trip_s(0xB), 0.0);
  EXPECT_EQ(a.control_round_trip_s(0xC), 0.0);

  // No NICs: one fallback rail over loopback.
  a.connect_data(0xB, b.identity().addresses);
  ASSERT_TRUE(run_until([&] { return heard_a.links.size() == 1 && heard_b.links.size() == 1; }));
  EXPECT_EQ(heard_a.links[0], 0xBu);
  EXPECT_EQ(heard_b.links[0], 0xAu);
  EXPECT_TRUE(heard_a.data_failed.empty());
  EXPECT_TRUE(heard_a.control_lost.empty());
  EXPECT_TRUE(heard_b.control_lost.empty());
}

TEST_F(PeerServerTest, APeerWhereNoDaemonListensIsGoneForControlAndFailedForData) {
  Heard heard;
  PeerServer& a = start(0xA, heard);
  const std::vector<std::string> nowhere{closed_address()};

  capnp::MallocMessageBuilder message;
  message.getRoot<capnp::AnyPointer>().setAs<capnp::Text>("anyone?");
  a.send_control(0xD, nowhere, message);
  a.connect_data(0xD, nowhere);
  ASSERT_TRUE(run_until([&] { return !heard.control_lost.empty() && !heard.data_failed.empty(); }));
  EXPECT_EQ(heard.control_lost[0], std::make_pair(uint64_t{0xD}, true));  // refused: gone
  ASSERT_EQ(heard.data_failed.size(), 1u);
  EXPECT_EQ(heard.data_failed[0].first, 0xDu);
  EXPECT_NE(heard.data_failed[0].second.find("Connection refused"), std::string::npos)
      << heard.data_failed[0].second;
  EXPECT_EQ(a.control_peer(0xD), nullptr);
}

TEST_F(PeerServerTest, AFormingPeerWhereNoDaemonListensFailsAtOnceNotAtItsDeadline) {
  Heard heard;
  PeerServer& a = start(0xA, heard);
  const auto start_time = std::chrono::steady_clock::now();
  a.connect_data(0xD, {closed_address()}, RailConnector::Forming{.deadline = start_time + 60s});
  ASSERT_TRUE(run_until([&] { return !heard.data_failed.empty(); }));  // 5 s, not 60
  EXPECT_NE(heard.data_failed[0].second.find("Connection refused"), std::string::npos)
      << heard.data_failed[0].second;
}

TEST_F(PeerServerTest, AFormingPeerWhoseDaemonAnswersOnlyLaterIsStillLinked) {
  // At first a socket that takes connections and never answers: a daemon whose control
  // thread is too busy to, as in a formation burst. Each handshake fails after 200 ms and
  // is dialled again; then the daemon proper starts on that address.
  handshake_timeout_ = 200ms;
  Heard heard_a;
  PeerServer& a = start(0xA, heard_a);
  const int mute = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(mute, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(mute, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(mute, 16), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(mute, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  a.connect_data(0xB, {address},
                 RailConnector::Forming{.deadline = std::chrono::steady_clock::now() + 60s});
  // Until two handshakes have failed: the second is a retry's.
  const auto until = std::chrono::steady_clock::now() + 500ms;
  while (std::chrono::steady_clock::now() < until) uv_run(&loop_, UV_RUN_NOWAIT);
  EXPECT_TRUE(heard_a.data_failed.empty());
  ::close(mute);

  Heard heard_b;
  start(0xB, heard_b, address);
  ASSERT_TRUE(run_until([&] { return heard_a.links.size() == 1 && heard_b.links.size() == 1; }));
  EXPECT_EQ(heard_a.links[0], 0xBu);
  EXPECT_TRUE(heard_a.data_failed.empty());
}

TEST_F(PeerServerTest, TheListenersBacklogIsTheSettingAsTheKernelCapsIt) {
  int somaxconn = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> somaxconn;
  ASSERT_GT(somaxconn, 0);
  backlog_ = 100;
  Heard heard;
  EXPECT_EQ(start(0xA, heard).listen_backlog(), std::min(100, somaxconn));
  backlog_ = PeerServer::Settings{}.backlog;
  EXPECT_EQ(start(0xB, heard).listen_backlog(), std::min(backlog_, somaxconn));
}

TEST_F(PeerServerTest, AQuietControlConnectionClosesWithNoLossAndTheNextMessageOpensAnother) {
  control_idle_close_ = 300ms;
  Heard heard_a;
  Heard heard_b;
  PeerServer& a = start(0xA, heard_a);
  PeerServer& b = start(0xB, heard_b);
  send_text(a, b, "join");
  ASSERT_TRUE(run_until([&] { return heard_b.messages.size() == 1; }));
  send_text(b, a, "formed");
  ASSERT_TRUE(run_until([&] { return heard_a.messages.size() == 1; }));
  ASSERT_TRUE(until_both_closed(a, b))
      << "the opener closes it once quiet, and the other side with it";
  EXPECT_TRUE(heard_a.control_lost.empty()) << "a close by agreement is no loss";
  EXPECT_TRUE(heard_b.control_lost.empty());
  ASSERT_NE(b.control_peer(0xA), nullptr) << "the peer is still known";
  // The side that did not open the first one opens the next.
  send_text(b, a, "again");
  ASSERT_TRUE(run_until([&] { return heard_a.messages.size() == 2; }));
  EXPECT_EQ(heard_a.messages[1], std::make_pair(uint64_t{0xB}, std::string("again")));
  send_text(a, b, "more");
  ASSERT_TRUE(run_until([&] { return heard_b.messages.size() == 2; }));
  EXPECT_EQ(heard_b.messages[1].second, "more");
  ASSERT_TRUE(until_both_closed(a, b));
  EXPECT_EQ(heard_a.messages.size(), 2u) << "nothing delivered twice";
  EXPECT_EQ(heard_b.messages.size(), 2u);
  EXPECT_TRUE(heard_a.control_lost.empty());
  EXPECT_TRUE(heard_b.control_lost.empty());
}

TEST_F(PeerServerTest, AQuietControlConnectionStaysWhileAJoinWaitsOnThePeer) {
  control_idle_close_ = 200ms;
  busy_ = true;
  Heard heard_a;
  Heard heard_b;
  PeerServer& a = start(0xA, heard_a);
  PeerServer& b = start(0xB, heard_b);
  send_text(a, b, "join");
  ASSERT_TRUE(run_until([&] { return heard_b.messages.size() == 1; }));
  // Five times the idle close: it would have closed by now were it not busy.
  const auto until = std::chrono::steady_clock::now() + 5 * control_idle_close_;
  EXPECT_FALSE(run_until([&] {
                 return a.open_control_connections() == 0 ||
                        std::chrono::steady_clock::now() > until;
               }) &&
               a.open_control_connections() == 0);
  EXPECT_EQ(a.open_control_connections(), 1u);
  busy_ = false;
  ASSERT_TRUE(run_until([&] { return a.open_control_connections() == 0; }));
  EXPECT_TRUE(heard_a.control_lost.empty());
  EXPECT_TRUE(heard_b.control_lost.empty());
}

TEST_F(PeerServerTest, ADaemonGoneWhileItsControlConnectionSleptIsFoundByTheNextFailedPath) {
  control_idle_close_ = 200ms;
  Heard heard_a;
  Heard heard_b;
  PeerServer& a = start(0xA, heard_a);
  PeerServer& b = start(0xB, heard_b);
  const std::vector<std::string> b_addresses = b.identity().addresses;
  send_text(a, b, "join");
  ASSERT_TRUE(run_until([&] { return heard_b.messages.size() == 1; }));
  ASSERT_TRUE(until_both_closed(a, b));
  b.close();  // its daemon stops: nothing listens at its address any more
  ASSERT_TRUE(run_until([&] { return b.open_control_connections() == 0; }));
  EXPECT_TRUE(heard_a.control_lost.empty()) << "nothing was open to notice it";
  // The data path to it fails: a control connection is tried, refused, and it is gone.
  a.rail_lost(0xB, "", b_addresses.at(0), "", /*pathless=*/false);
  ASSERT_TRUE(run_until([&] { return !heard_a.control_lost.empty(); }));
  EXPECT_EQ(heard_a.control_lost[0], std::make_pair(uint64_t{0xB}, true));
}

TEST_F(PeerServerTest, ControlConnectionsFromDialsThatCrossedAllCloseWhenQuiet) {
  control_idle_close_ = 300ms;
  Heard heard_a;
  Heard heard_b;
  PeerServer& a = start(0xA, heard_a);
  PeerServer& b = start(0xB, heard_b);
  // Both dial at once: two connections, each side's own current one or the other's.
  send_text(a, b, "from a");
  send_text(b, a, "from b");
  ASSERT_TRUE(
      run_until([&] { return heard_a.messages.size() == 1 && heard_b.messages.size() == 1; }));
  ASSERT_TRUE(until_both_closed(a, b))
      << "a connection left over from the crossing stays open: a " << a.open_control_connections()
      << ", b " << b.open_control_connections();
  EXPECT_TRUE(heard_a.control_lost.empty());
  EXPECT_TRUE(heard_b.control_lost.empty());
  send_text(a, b, "again");
  ASSERT_TRUE(run_until([&] { return heard_b.messages.size() == 2; }));
  EXPECT_EQ(heard_a.messages.size(), 1u) << "nothing delivered twice";
  EXPECT_EQ(heard_b.messages[1].second, "again");
}

}  // namespace
}  // namespace plexus::daemon
