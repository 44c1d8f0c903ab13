#include "transports/tcp/tcp_path.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/unique_fd.h"
#include "transports/path/socket_endpoint.h"
#include "transports/tcp/tcp_connection.h"
#include "transports/tcp/tcp_delivery.h"
#include "transports/tcp/tcp_path_latency.h"
#include "transports/tcp/tcp_peer_silence.h"

namespace plexus::transports {
namespace {

// A receiver acknowledges what GRO merged as one: up to a 64 KiB segment at a time. Held
// to less than that unacknowledged, a sender would wait for every acknowledgement.
constexpr uint64_t kAckBatchBytes = 64 << 10;

class TcpPath final : public DataPath {
 public:
  TcpPath(int fd, const wire::DataFrameLimits& limits, Callbacks callbacks)
      : conn_(fd, limits, std::move(callbacks)),
        local_(socket_endpoint(fd, false)),
        remote_(socket_endpoint(fd, true)) {}

  void queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
             uint64_t token) override {
    conn_.queue(header, payload, token);
  }
  void queue_urgent(const wire::DataFrameHeader& header, uint64_t token) override {
    conn_.queue_urgent(header, {}, token);
  }
  // The socket's unacknowledged bytes too: the kernel's send buffer holds megabytes.
  uint64_t backlog_bytes() const override {
    return conn_.queued_bytes() + conn_.kernel_unacknowledged_bytes();
  }
  uint64_t unsent_bytes() const override {
    return conn_.queued_bytes() + conn_.kernel_unsent_bytes();
  }
  bool held_by_queue_limit() const override {
    return conn_.queued_bytes() == 0 && over_kernel_limit() > 0;
  }
  uint64_t waiting_bytes() const override { return conn_.queued_bytes() + over_kernel_limit(); }
  // TCP_NOTSENT_LOWAT: the socket takes more, and polls writable, only while fewer than
  // `bytes` are unsent. With in_flight_too it may also hold only about `bytes` plus a round
  // trip's worth at `rate` unacknowledged (at least an acknowledgement's batch): TCP's
  // congestion window alone would fill the bottleneck's queue (a shaper's, the NIC's qdisc)
  // with everything it is given. Nothing says when that limit frees room, so it is looked
  // at again on a timer (NodeLinks).
  void limit_queue(uint64_t bytes, double rate, bool in_flight_too) override {
    const auto round_trip = static_cast<uint64_t>(rate * kernel_min_round_trip_s(conn_.fd()));
    kernel_limit_ = in_flight_too ? std::max(bytes, kAckBatchBytes) + round_trip : 0;
    const int lowat = static_cast<int>(std::min<uint64_t>(bytes, INT32_MAX));
    ::setsockopt(conn_.fd(), IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof(lowat));
  }
  void abandon_placement_of(uint64_t channel_seq) override {
    conn_.abandon_placement_of(channel_seq);
  }
  int64_t network_silence_ms() const override { return tcp_peer_silence_ms(conn_.fd()); }

  int poll_fd() const override { return conn_.fd(); }
  bool wants_write() const override { return conn_.wants_write(); }
  bool on_readable(size_t max_bytes) override { return conn_.on_readable(max_bytes); }
  bool on_writable() override { return conn_.on_writable(); }
  const std::string& error() const override { return conn_.error(); }
  bool peer_closed() const override { return conn_.peer_closed(); }
  uint64_t bytes_sent() const override { return conn_.bytes_sent(); }
  uint64_t bytes_received() const override { return conn_.bytes_received(); }
  bool abandon_placement(const void* owner) override { return conn_.abandon_placement(owner); }
  void release_idle_memory() override { conn_.release_buffer(); }
  PathEndpoint local() const override { return local_; }
  PathEndpoint remote() const override { return remote_; }
  std::optional<PathDelivery> delivery() const override {
    const std::optional<TcpDelivery> d = tcp_delivery(conn_.fd());
    if (!d) return std::nullopt;
    return PathDelivery{d->rate_bytes_per_s, d->app_limited, d->rtt_us,
                        d->unsent_bytes,     d->acked_bytes, d->network_busy_us};
  }
  // An RST, no FIN: a FIN the kernel kept retransmitting would reach the peer when the NIC
  // came back and read as "this daemon stopped", losing a peer that is reconnecting.
  void close_abortively() override {
    const linger abort_on_close{1, 0};
    ::setsockopt(conn_.fd(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
  }
  const char* transport() const override { return "tcp"; }
  // A TCP connection has no error state of its own that a process can force and its own
  // error handling then find (closing it is a different event): take the NIC down instead.
  std::string inject_fault() override {
    return "a TCP path has no fault to inject (take its NIC down instead)";
  }

 private:
  // The socket's unacknowledged bytes beyond limit_queue's limit (0 without one).
  uint64_t over_kernel_limit() const {
    if (kernel_limit_ == 0) return 0;
    const uint64_t held = conn_.kernel_unacknowledged_bytes();
    return held > kernel_limit_ ? held - kernel_limit_ : 0;
  }

  TcpConnection conn_;
  uint64_t kernel_limit_ = 0;  // limit_queue: unacknowledged bytes the socket may hold; 0: any
  PathEndpoint local_;
  PathEndpoint remote_;
};

}  // namespace

PathOpener tcp_path_opener(int fd) {
  // Shared: a PathOpener is copyable. The socket closes with the last copy unless a call
  // took it.
  auto owned = std::make_shared<common::UniqueFd>(fd);
  return [owned](const wire::DataFrameLimits& limits,
                 DataPath::Callbacks callbacks) -> std::unique_ptr<DataPath> {
    return std::make_unique<TcpPath>(owned->release(), limits, std::move(callbacks));
  };
}

}  // namespace plexus::transports
