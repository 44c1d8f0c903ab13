#include "transports/rdma/rdma_path.h"

#include <fcntl.h>
#include <sys/epoll.h>

#include <cerrno>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include "common/unique_fd.h"
#include "transports/path/socket_endpoint.h"
#include "transports/rdma/errno_text.h"
#include "transports/rdma/frame_transfer.h"
#include "transports/rdma/path_socket.h"
#include "transports/rdma/path_verbs.h"
#include "transports/rdma/rdma_hello.h"
#include "transports/rdma/verbs_devices.h"

namespace plexus::transports::rdma {
namespace {

using Clock = std::chrono::steady_clock;

// The DataPath the links see, put together from its pieces: the socket and its set-up
// exchange (path_socket.h), the verbs objects (path_verbs.h) and the frames over them
// (frame_transfer.h). Owns those, the epoll descriptor behind poll_fd(), and the path's
// failure (the first reason, named once). Sets the path up in its constructor, connects the
// queue pair when the peer's setup message is in, and on each readable event takes what the
// socket, the device's async events and the completion channel hold. Called only by the
// thread that runs the links' event loop.
class RdmaPath final : public DataPath {
 public:
  RdmaPath(int fd, RdmaSettings settings, std::shared_ptr<const SendableMemory> sendable,
           std::shared_ptr<VerbsDevices> devices, PinnedBudget::Hold reserved,
           const wire::DataFrameLimits& limits, Callbacks callbacks);

  void queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
             uint64_t token) override {
    transfer_.queue(header, payload, token);
  }
  void queue_urgent(const wire::DataFrameHeader& header, uint64_t token) override {
    transfer_.queue_urgent(header, token);
  }
  uint64_t backlog_bytes() const override { return transfer_.backlog_bytes(); }
  uint64_t unsent_bytes() const override { return transfer_.unsent_bytes(); }
  uint64_t waiting_bytes() const override { return transfer_.unsent_bytes(); }
  // Posted writes not yet complete are this path's send queue: kept to about `bytes`.
  // (The rate does not matter: a write completes once it is delivered, so posted bytes
  // are what queues.)
  void limit_queue(uint64_t bytes, double, bool) override { transfer_.limit_queue(bytes); }
  void abandon_placement_of(uint64_t) override {}  // frames land in the ring, never placed
  int64_t network_silence_ms() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_)
        .count();
  }

  int poll_fd() const override { return epoll_.get(); }
  // Posting never blocks; but a failure outside on_readable (in the setup, or posting from
  // queue()) must reach the links now, through on_writable, not by the path's silence.
  bool wants_write() const override { return failed(); }
  bool on_readable(size_t max_bytes) override;
  bool on_writable() override { return !failed(); }
  const std::string& error() const override { return error_; }
  bool peer_closed() const override { return socket_.peer_closed(); }
  uint64_t bytes_sent() const override { return transfer_.bytes_sent(); }
  uint64_t bytes_received() const override { return transfer_.bytes_received(); }
  uint64_t payload_bytes_sent_in_place() const override { return transfer_.in_place_bytes(); }
  bool abandon_placement(const void*) override { return false; }
  PathEndpoint local() const override { return local_; }
  PathEndpoint remote() const override { return remote_; }
  std::optional<PathDelivery> delivery() const override { return std::nullopt; }
  void close_abortively() override { socket_.close_abortively(); }
  const char* transport() const override { return "rdma"; }
  // The queue pair to IBV_QPS_ERR: every posted work request (the receives always are)
  // completes flushed, and the frame transfer fails the path on the first, as on a real
  // QP fault.
  std::string inject_fault() override {
    if (failed()) return "the path has failed already";
    if (verbs_.qp == nullptr || !socket_.ready()) {
      return "the path's queue pair is still being set up";
    }
    return verbs_.move_to_error();
  }

 private:
  bool failed() const { return !error_.empty(); }
  bool fail(std::string why) {
    if (!failed()) {
      transfer_.stop();
      error_ = "RDMA path " + local_.text + " -> " + remote_.text + ": " + why;
    }
    return false;
  }
  bool connect_queue_pair();

  std::shared_ptr<VerbsDevices> devices_;  // the node's: devices and the pinned bound
  PathSocket socket_;
  common::UniqueFd epoll_;
  RdmaSettings settings_;
  wire::DataFrameLimits limits_;
  PathEndpoint local_;
  PathEndpoint remote_;
  std::string error_;  // empty until the path fails
  uint32_t psn_ = 0;   // this side's first packet sequence number
  PathVerbs verbs_;
  FrameTransfer transfer_;
  Clock::time_point started_;
  Clock::time_point last_heard_;
};

RdmaPath::RdmaPath(int fd, RdmaSettings settings, std::shared_ptr<const SendableMemory> sendable,
                   std::shared_ptr<VerbsDevices> devices, PinnedBudget::Hold reserved,
                   const wire::DataFrameLimits& limits, Callbacks callbacks)
    : devices_(std::move(devices)),
      socket_(fd),
      settings_(settings),
      limits_(limits),
      local_(socket_endpoint(fd, false)),
      remote_(socket_endpoint(fd, true)),
      verbs_(settings),
      transfer_(
          verbs_, settings, limits,
          FrameTransfer::Hooks{.on_frame = std::move(callbacks.on_frame),
                               .on_sent = std::move(callbacks.on_sent),
                               .fail = [this](std::string why) { return fail(std::move(why)); }}),
      started_(Clock::now()),
      last_heard_(started_) {
  epoll_ = common::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) {
    fail(errno_text("epoll_create1", errno));
    return;
  }
  const std::optional<uint32_t> address = socket_.local_ipv4();
  if (!address) {
    fail("the path's socket has no IPv4 address (RDMA paths are RoCE v2 over IPv4)");
    return;
  }
  auto found = devices_->find(*address);
  if (!found) {
    fail(found.error());
    return;
  }
  // The device in the path's name, one word (plexusctl's tables split on spaces).
  local_.text += "@" + found->port.device;
  const uint64_t bytes = path_pinned_bytes(settings_);
  if (reserved.bytes() != bytes) {
    auto pinned = devices_->budget()->take(bytes, PinnedBudget::Use::kPath);
    if (!pinned) {
      fail(pinned.error());
      return;
    }
    reserved = pinned.take();
  }
  devices_->make_room();
  if (std::string why =
          verbs_.open(found.take(), std::move(reserved), settings_, std::move(sendable));
      !why.empty()) {
    fail(why);
    return;
  }
  if (!transfer_.post_receives()) return;
  if (ibv_req_notify_cq(verbs_.cq.get(), 0) != 0) {
    fail("ibv_req_notify_cq failed");
    return;
  }
  // (The device's async descriptor is made non-blocking once, by VerbsDevice::open.)
  const int flags = ::fcntl(verbs_.channel->fd, F_GETFL);
  ::fcntl(verbs_.channel->fd, F_SETFL, flags | O_NONBLOCK);
  for (int watched :
       {socket_.fd(), verbs_.channel->fd, verbs_.port.context->async_fd, verbs_.wake.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = watched;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, watched, &ev) != 0) {
      fail(errno_text("epoll_ctl", errno));
      return;
    }
  }
  psn_ = std::random_device{}() & 0xffffff;
  Hello mine;
  mine.qpn = verbs_.qp->qp_num;
  mine.psn = psn_;
  mine.gid = verbs_.port.gid;
  mine.ring_address = reinterpret_cast<uint64_t>(verbs_.ring.data());
  mine.ring_rkey = verbs_.ring_mr->rkey;
  mine.ring_bytes = verbs_.ring.size();
  mine.receive_depth = settings_.receive_depth;
  mine.mtu = verbs_.port.active_mtu;
  if (std::string why = socket_.send_hello(encode_hello(mine)); !why.empty()) {
    fail(why);
    return;
  }
  last_heard_ = Clock::now();  // pinning the rings is not the network's silence
}

bool RdmaPath::connect_queue_pair() {
  const auto decoded = decode_hello(socket_.peer_hello());
  if (!decoded.ok()) return fail(decoded.error());
  const Hello& peer = *decoded;
  if (std::string why = check_peer_hello(peer, socket_.peer_ipv4(),
                                         wire::kDataFrameHeaderBytes + limits_.max_payload_bytes);
      !why.empty()) {
    return fail(why);
  }
  transfer_.connect(peer);
  if (std::string why = verbs_.connect(peer, settings_, psn_); !why.empty()) return fail(why);
  if (std::string why = socket_.send_ready(); !why.empty()) return fail(why);
  return true;
}

bool RdmaPath::on_readable(size_t max_bytes) {
  if (failed()) return false;
  if (!socket_.ready() && Clock::now() - started_ > settings_.setup_timeout) {
    return fail("the RDMA setup did not finish within " +
                std::to_string(settings_.setup_timeout.count()) + " ms");
  }
  for (bool drained = false; !drained;) {
    const auto step = socket_.read();
    if (!step.ok()) return fail(step.error());
    switch (*step) {
      case PathSocket::Step::kDrained:
        drained = true;
        break;
      case PathSocket::Step::kHeard:
        last_heard_ = Clock::now();
        break;
      case PathSocket::Step::kHello:
        last_heard_ = Clock::now();
        if (!connect_queue_pair()) return false;
        break;
      case PathSocket::Step::kPeerReady:
        last_heard_ = Clock::now();
        if (!transfer_.start()) return false;
        break;
    }
  }
  if (std::string why = verbs_.fatal_async_event(); !why.empty()) return fail(why);
  // A pool whose session went is unpinned now, not at this path's next large frame (a
  // standby backup may send none for a long time).
  if (verbs_.pool_windows) verbs_.pool_windows->forget_withdrawn();
  // (`max_bytes`, the links' fairness bound, is not needed: the ring bounds what one call
  // can find.)
  (void)max_bytes;
  if (!transfer_.take_completions(&last_heard_)) return false;
  // A new path's rings pushed the node past its bound while windows were in use: those
  // whose writes completed give their bytes back now.
  if (devices_->budget()->over()) devices_->make_room();
  return !failed();
}

}  // namespace

PathOpener rdma_path_opener(int fd, RdmaSettings settings,
                            std::shared_ptr<const SendableMemory> sendable,
                            std::shared_ptr<VerbsDevices> devices, PinnedBudget::Hold reserved) {
  auto owned = std::make_shared<common::UniqueFd>(fd);
  // The opener is a copyable function: the hold goes to the one path it opens.
  auto held = std::make_shared<PinnedBudget::Hold>(std::move(reserved));
  if (devices == nullptr) {
    devices = std::make_shared<VerbsDevices>(
        std::make_shared<PinnedBudget>(settings.pinned_max_bytes), settings.max_registrations);
  }
  return [owned, settings, sendable, devices, held](
             const wire::DataFrameLimits& limits,
             DataPath::Callbacks callbacks) -> std::unique_ptr<DataPath> {
    return std::make_unique<RdmaPath>(owned->release(), settings, sendable, devices,
                                      std::move(*held), limits, std::move(callbacks));
  };
}

}  // namespace plexus::transports::rdma
