// The failover gap of the daemon's peer links: a sender streams frames to a receiver over
// one path per NIC (NodeLinks, the reliable channel, netlink NIC events: the code plexusd
// runs), the script breaks a NIC (set down, or a silent black hole) mid-stream, and the
// receiver reports the longest time in which no byte arrived. Run in two network
// namespaces by tools/bench/failover_gap.sh.
//
//   failover_gap_bench receive --listen IP:PORT --paths N --seconds S [--transport rdma]
//   failover_gap_bench send --connect IP:PORT,IP:PORT --seconds S [--transport rdma]
// The receiver prints one JSON line at the end. --transport rdma runs each path over an RC
// queue pair (transports/rdma/rdma_path.h) set up over the connection, as plexusd does
// (tools/bench/rdma_vm_failover_gap.sh, between soft-RoCE VMs).

// CLI11's string splitting trips GCC 12's -Wnull-dereference (a false positive inside
// <string>; see tools/plexus-bench/options.cc).
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/socket_address.h"
#include "daemon/links/node_links.h"
#include "transports/tcp/tcp_path.h"
#ifdef PLEXUS_HAVE_RDMA
#include "transports/rdma/rdma_path.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;
using plexus::daemon::NodeLinks;
namespace wire = plexus::transports::wire;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "failover_gap_bench: %s\n", what.c_str());
  std::exit(1);
}

// The interface that holds the local address of connected socket `fd`.
std::string nic_of(int fd) {
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) return "?";
  std::string name = "?";
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return name;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    if (reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == local.sin_addr.s_addr) {
      name = i->ifa_name;
      break;
    }
  }
  ::freeifaddrs(list);
  return name;
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A path over connection `fd`: an RC queue pair (`rdma`, checked by main) or TCP.
plexus::transports::PathOpener opener(int fd, bool rdma) {
#ifdef PLEXUS_HAVE_RDMA
  if (rdma) return plexus::transports::rdma::rdma_path_opener(fd, {});
#else
  (void)rdma;
#endif
  return plexus::transports::tcp_path_opener(fd);
}

// What the receiver records: when each frame arrived, and when the in-order prefix of the
// stream (every frame up to sequence number k) grew, which is what an op waiting for a
// particular frame sees.
struct Record {
  std::vector<Clock::time_point> deliveries;
  std::vector<bool> arrived;  // by channel sequence number
  uint64_t prefix = 0;
  std::vector<Clock::time_point> prefix_growth;
};

NodeLinks::Handler handler(Record* record, std::string* lost) {
  NodeLinks::Handler h;
  h.on_frame = [record](uint64_t, const wire::DataFrameHeader& header,
                        std::span<const std::byte> p) {
    if (record == nullptr || p.empty()) return std::string();
    const auto now = Clock::now();
    record->deliveries.push_back(now);
    if (record->arrived.size() <= header.channel_seq)
      record->arrived.resize(header.channel_seq * 2 + 1);
    record->arrived[header.channel_seq] = true;
    const uint64_t before = record->prefix;
    while (record->prefix + 1 < record->arrived.size() && record->arrived[record->prefix + 1]) {
      ++record->prefix;
    }
    if (record->prefix != before) record->prefix_growth.push_back(now);
    return std::string();
  };
  h.on_lost = [lost](uint64_t, const std::string&, const std::string& why) { *lost = why; };
  return h;
}

int receive(const std::string& listen_at, int paths, double seconds, bool rdma) {
  sockaddr_storage address{};
  socklen_t len = 0;
  if (!plexus::common::parse_address(listen_at, &address, &len)) die("bad --listen");
  const int listener = ::socket(address.ss_family, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listener, reinterpret_cast<sockaddr*>(&address), len) != 0 ||
      ::listen(listener, 8) != 0) {
    die("listen on " + listen_at + ": " + std::strerror(errno));
  }
  Record record;
  record.deliveries.reserve(1 << 22);
  record.prefix_growth.reserve(1 << 22);
  std::string lost;
  NodeLinks links(handler(&record, &lost));
  if (std::string error = links.watch_nics(); !error.empty()) die("netlink: " + error);
  for (int p = 0; p < paths; ++p) {
    const int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) die(std::string("accept: ") + std::strerror(errno));
    set_nodelay(fd);
    links.add(1, "sender", opener(fd, rdma), nic_of(fd));
  }
  ::close(listener);
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds + 5);
  while (Clock::now() < end && lost.empty()) {
    links.poll(1);
    // The sender closes its paths once its stream is acknowledged.
    if (!links.has(1)) break;
  }
  // The longest time without a delivery, and without the in-order prefix growing, once the
  // stream had started (its first 200 ms are TCP's slow start).
  auto longest_gap = [](const std::vector<Clock::time_point>& times, double* at_s) {
    double longest = 0;
    if (times.empty()) return longest;
    const auto steady = times.front() + std::chrono::milliseconds(200);
    for (size_t i = 1; i < times.size(); ++i) {
      if (times[i - 1] < steady) continue;
      const double gap = std::chrono::duration<double, std::milli>(times[i] - times[i - 1]).count();
      if (gap > longest) {
        longest = gap;
        *at_s = std::chrono::duration<double>(times[i - 1] - times.front()).count();
      }
    }
    return longest;
  };
  double gap_at_s = 0;
  double stall_at_s = 0;
  const double max_gap_ms = longest_gap(record.deliveries, &gap_at_s);
  const double max_stall_ms = longest_gap(record.prefix_growth, &stall_at_s);
  const auto peers = links.snapshot();
  std::printf(
      "{\"max_gap_ms\": %.2f, \"gap_at_s\": %.3f, \"max_in_order_stall_ms\": %.2f, "
      "\"stall_at_s\": %.3f, \"frames\": %zu, \"duplicates_dropped\": %llu}\n",
      max_gap_ms, gap_at_s, max_stall_ms, stall_at_s, record.deliveries.size(),
      static_cast<unsigned long long>(peers.empty() ? 0
                                                    : peers.front().counters.duplicates_dropped));
  return 0;
}

int send(const std::string& connect_to, double seconds, bool rdma) {
  std::string lost;
  NodeLinks links(handler(nullptr, &lost));
  if (std::string error = links.watch_nics(); !error.empty()) die("netlink: " + error);
  size_t start = 0;
  while (start < connect_to.size()) {
    const size_t comma = std::min(connect_to.find(',', start), connect_to.size());
    const std::string target = connect_to.substr(start, comma - start);
    start = comma + 1;
    sockaddr_storage address{};
    socklen_t len = 0;
    if (!plexus::common::parse_address(target, &address, &len)) die("bad address " + target);
    const int fd = ::socket(address.ss_family, SOCK_STREAM, 0);
    bool connected = false;
    for (int attempt = 0; attempt < 100 && !connected; ++attempt) {
      connected = ::connect(fd, reinterpret_cast<sockaddr*>(&address), len) == 0;
      if (!connected) ::usleep(20000);  // the receiver may not listen yet
    }
    if (!connected) die("connect to " + target + ": " + std::strerror(errno));
    set_nodelay(fd);
    links.add(2, "receiver", opener(fd, rdma), nic_of(fd));
  }
  // Messages of 1 MiB (two 512 KiB frames), 16 in flight: the paths always have a backlog.
  std::vector<std::byte> data(1 << 20, std::byte{0x5A});
  constexpr int kInFlight = 16;
  int in_flight = 0;
  uint32_t step = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (lost.empty() && (Clock::now() < end || in_flight > 0)) {
    while (Clock::now() < end && in_flight < kInFlight) {
      ++in_flight;
      links.send_message(2, 1, 0, step++, data, nullptr, [&in_flight] { --in_flight; });
    }
    links.poll(1);
  }
  if (!lost.empty()) die("lost the receiver: " + lost);
  const auto peers = links.snapshot();
  if (!peers.empty()) {
    std::fprintf(stderr, "sender: %llu frames, %llu resent (%llu bytes), %llu path failures\n",
                 static_cast<unsigned long long>(peers.front().counters.frames_sent),
                 static_cast<unsigned long long>(peers.front().counters.frames_resent),
                 static_cast<unsigned long long>(peers.front().counters.bytes_resent),
                 static_cast<unsigned long long>(peers.front().counters.path_failures));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"failover_gap_bench: the longest delivery gap of a peer link across a NIC failure"};
  app.require_subcommand(1);
  std::string listen_at;
  std::string connect_to;
  int paths = 2;
  double seconds = 3;
  auto* receive_cmd = app.add_subcommand("receive", "Accept the paths and time deliveries");
  receive_cmd->add_option("--listen", listen_at, "IP:PORT")->required();
  receive_cmd->add_option("--paths", paths, "Connections to accept")->capture_default_str();
  auto* send_cmd = app.add_subcommand("send", "Stream frames over one path per address");
  send_cmd->add_option("--connect", connect_to, "IP:PORT,IP:PORT (one per NIC)")->required();
  std::string transport = "tcp";
  for (auto* sub : {receive_cmd, send_cmd}) {
    sub->add_option("--seconds", seconds, "How long the sender streams")->capture_default_str();
    sub->add_option("--transport", transport,
                    "tcp, or rdma: an RC queue pair per path (both ends alike; needs a verbs "
                    "device on the paths' addresses)")
        ->capture_default_str()
        ->check(CLI::IsMember({"tcp", "rdma"}));
  }
  CLI11_PARSE(app, argc, argv);
  const bool rdma = transport == "rdma";
#ifndef PLEXUS_HAVE_RDMA
  if (rdma) die("--transport rdma: this build has no RDMA (libibverbs-dev was not found)");
#endif
  spdlog::set_level(spdlog::level::err);  // the links' path events would bury the result
  return receive_cmd->parsed() ? receive(listen_at, paths, seconds, rdma)
                               : send(connect_to, seconds, rdma);
}
