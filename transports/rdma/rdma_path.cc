#include "transports/rdma/rdma_path.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include "common/unique_fd.h"
#include "transports/path/socket_endpoint.h"
#include "transports/rdma/local_ring.h"
#include "transports/rdma/mr_cache.h"
#include "transports/rdma/qp_transitions.h"
#include "transports/rdma/rdma_hello.h"
#include "transports/rdma/remote_ring.h"
#include "transports/rdma/send_window.h"
#include "transports/rdma/verbs_port.h"
#include "transports/rdma/work_completion.h"

namespace plexus::transports::rdma {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::byte kReadyByte{'R'};  // after it, this side's queue pair can receive

// Receives posted beyond those advertised for frames: a credit SEND completes when the
// peer's device has it, not when the peer's daemon has reposted the receive it took, so a
// few credits can land before the peer catches up; these take them without a
// receiver-not-ready stall (rnr_retry stays the backstop).
constexpr uint32_t kCreditReceives = 32;

// Anonymous memory, page aligned, for registration.
class Pages {
 public:
  explicit Pages(size_t bytes) : bytes_(bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
  }
  ~Pages() {
    if (base_ != nullptr) ::munmap(base_, bytes_);
  }
  Pages(const Pages&) = delete;
  Pages& operator=(const Pages&) = delete;
  std::byte* data() const { return base_; }
  size_t size() const { return bytes_; }

 private:
  std::byte* base_ = nullptr;
  size_t bytes_;
};

std::string errno_text(const std::string& call, int err) {
  return call + ": " + std::strerror(err);
}

class RdmaPath final : public DataPath {
 public:
  RdmaPath(int fd, RdmaSettings settings, std::shared_ptr<const SendableMemory> sendable,
           const wire::DataFrameLimits& limits, Callbacks callbacks)
      : socket_(fd),
        settings_(settings),
        sendable_(std::move(sendable)),
        limits_(limits),
        callbacks_(std::move(callbacks)),
        local_(socket_endpoint(fd, false)),
        remote_(socket_endpoint(fd, true)),
        ring_(settings.ring_bytes),
        bounce_(settings.bounce_bytes),
        slots_(static_cast<size_t>(settings.receive_depth + kCreditReceives) * kReceiveSlotBytes),
        credit_buffer_(4096),
        local_ring_(settings.ring_bytes),
        bounce_space_(settings.bounce_bytes),
        window_(1, settings.send_depth),
        started_(Clock::now()),
        last_heard_(started_) {
    set_up();
  }

  ~RdmaPath() override {
    if (qp_ != nullptr) ibv_destroy_qp(qp_);
    if (cq_ != nullptr) ibv_destroy_cq(cq_);
    if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
    // No work request is left to read them (the queue pair is gone): the pool windows'
    // registrations go before their protection domain.
    pins_in_flight_.clear();
    mr_cache_.reset();
    for (ibv_mr* mr : {ring_mr_, bounce_mr_, slots_mr_, credit_mr_}) {
      if (mr != nullptr) ibv_dereg_mr(mr);
    }
    if (pd_ != nullptr) ibv_dealloc_pd(pd_);
  }

  void queue(const wire::DataFrameHeader& header, std::span<const std::byte> payload,
             uint64_t token) override {
    pending_.push_back(Pending{header, payload, token});
    pending_bytes_ += wire::kDataFrameHeaderBytes + payload.size();
    pump();
  }
  void queue_urgent(const wire::DataFrameHeader& header, uint64_t token) override {
    pending_.push_front(Pending{header, {}, token});
    pending_bytes_ += wire::kDataFrameHeaderBytes;
    pump();
  }
  uint64_t backlog_bytes() const override { return pending_bytes_ + posted_bytes_; }
  uint64_t unsent_bytes() const override { return pending_bytes_; }
  uint64_t waiting_bytes() const override { return pending_bytes_; }
  // Posted writes not yet complete are this path's send queue: kept to about `bytes`.
  // (The rate does not matter: a write completes once it is delivered, so posted bytes
  // are what queues.)
  void limit_queue(uint64_t bytes, double, bool) override { posted_limit_ = bytes; }
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
  bool peer_closed() const override { return peer_closed_; }
  uint64_t bytes_sent() const override { return bytes_sent_; }
  uint64_t bytes_received() const override { return bytes_received_; }
  uint64_t payload_bytes_sent_in_place() const override { return in_place_bytes_; }
  bool abandon_placement(const void*) override { return false; }
  PathEndpoint local() const override { return local_; }
  PathEndpoint remote() const override { return remote_; }
  std::optional<PathDelivery> delivery() const override { return std::nullopt; }
  void close_abortively() override {
    const linger abort_on_close{1, 0};
    ::setsockopt(socket_.get(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof(abort_on_close));
  }
  const char* transport() const override { return "rdma"; }
  // The queue pair to IBV_QPS_ERR: every posted work request (the receives always are)
  // completes flushed, and handle_completion fails the path on the first, as on a real
  // QP fault.
  std::string inject_fault() override {
    if (failed()) return "the path has failed already";
    if (qp_ == nullptr || state_ != State::kReady)
      return "the path's queue pair is still being set up";
    QpTransition to_error = error_transition();
    const int rc = ibv_modify_qp(qp_, &to_error.attr, to_error.mask);
    return rc == 0 ? std::string() : errno_text("moving the queue pair to the error state", rc);
  }

 private:
  enum class State { kSetup, kReady, kFailed };
  struct Pending {
    wire::DataFrameHeader header;
    std::span<const std::byte> payload;
    uint64_t token;
  };

  bool failed() const { return state_ == State::kFailed; }
  bool fail(std::string why) {
    if (!failed()) {
      state_ = State::kFailed;
      error_ = "RDMA path " + local_.text + " -> " + remote_.text + ": " + why;
    }
    return false;
  }
  void set_up();
  bool post_receive(uint64_t slot);
  bool read_socket();
  bool connect_queue_pair();
  bool handle_completions(size_t max_bytes);
  bool handle_completion(const ibv_wc& wc);
  bool handle_frame(const Completion& completion);
  bool handle_async_events();
  bool maybe_send_credit(bool force);
  void pump();
  void pump_frames();
  MrCache::Pin pin_in_place(std::span<const std::byte> payload);
  void forget_withdrawn_regions();
  void probe_if_stalled();

  common::UniqueFd socket_;
  common::UniqueFd epoll_;
  RdmaSettings settings_;
  std::shared_ptr<const SendableMemory> sendable_;
  wire::DataFrameLimits limits_;
  Callbacks callbacks_;
  PathEndpoint local_;
  PathEndpoint remote_;
  State state_ = State::kSetup;
  std::string error_;
  bool peer_closed_ = false;

  VerbsPort port_;
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  Pages ring_;           // the peer writes frames here
  Pages bounce_;         // frames are copied here to be written
  Pages slots_;          // receive work requests' buffers (credit messages land here)
  Pages credit_buffer_;  // the credit this side sends
  ibv_mr* ring_mr_ = nullptr;
  ibv_mr* bounce_mr_ = nullptr;
  ibv_mr* slots_mr_ = nullptr;
  ibv_mr* credit_mr_ = nullptr;
  uint32_t psn_ = 0;
  // Windows of announced pools registered in this path's protection domain, and the pin of
  // each posted frame's window until its write completes (an empty pin for a copied frame;
  // a reliable connection completes its writes in order).
  std::optional<MrCache> mr_cache_;
  std::deque<MrCache::Pin> pins_in_flight_;
  uint64_t withdrawals_seen_ = 0;
  uint64_t in_place_bytes_ = 0;
  bool zero_copy_refused_ = false;  // a window could not be registered: copy from now on

  std::array<std::byte, kHelloBytes> peer_hello_bytes_{};
  size_t peer_hello_read_ = 0;
  bool peer_ready_ = false;
  bool ready_sent_ = false;
  Hello peer_;

  std::optional<RemoteRing> remote_ring_;  // the peer's ring, once its hello is in
  LocalRing local_ring_;
  RemoteRing bounce_space_;  // the bounce ring, handed back as writes complete
  SendWindow window_;        // sized once the peer's receive depth is known
  uint64_t frames_consumed_ = 0;
  uint64_t credit_reported_bytes_ = 0;
  uint64_t credit_reported_frames_ = 0;
  bool credit_in_flight_ = false;
  bool probe_in_flight_ = false;
  Clock::time_point last_probe_{};

  std::deque<Pending> pending_;
  uint64_t pending_bytes_ = 0;
  uint64_t posted_bytes_ = 0;
  uint64_t posted_limit_ = 0;  // limit_queue; 0: the rings and credits alone
  uint64_t bytes_sent_ = 0;
  uint64_t bytes_received_ = 0;
  Clock::time_point started_;
  Clock::time_point last_heard_;
};

void RdmaPath::set_up() {
  epoll_ = common::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) {
    fail(errno_text("epoll_create1", errno));
    return;
  }
  sockaddr_in address{};
  socklen_t len = sizeof address;
  if (::getsockname(socket_.get(), reinterpret_cast<sockaddr*>(&address), &len) != 0 ||
      address.sin_family != AF_INET) {
    fail("the path's socket has no IPv4 address (RDMA paths are RoCE v2 over IPv4)");
    return;
  }
  std::string why;
  auto port = find_verbs_port(address.sin_addr.s_addr, &why);
  if (!port) {
    fail(why);
    return;
  }
  port_ = std::move(*port);
  // The device in the path's name, one word (plexusctl's tables split on spaces).
  local_.text += "@" + port_.device;
  ibv_context* ctx = port_.context.get();
  if (ring_.data() == nullptr || bounce_.data() == nullptr || slots_.data() == nullptr ||
      credit_buffer_.data() == nullptr) {
    fail("no memory for the path's rings (" + std::to_string(settings_.ring_bytes) + " + " +
         std::to_string(settings_.bounce_bytes) + " bytes)");
    return;
  }
  pd_ = ibv_alloc_pd(ctx);
  channel_ = pd_ != nullptr ? ibv_create_comp_channel(ctx) : nullptr;
  const int cqe =
      static_cast<int>(settings_.send_depth + settings_.receive_depth + kCreditReceives + 1);
  cq_ = channel_ != nullptr ? ibv_create_cq(ctx, cqe, nullptr, channel_, 0) : nullptr;
  if (cq_ == nullptr) {
    fail(errno_text("creating the protection domain and completion queue", errno));
    return;
  }
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = settings_.send_depth;
  init.cap.max_recv_wr = settings_.receive_depth + kCreditReceives;
  init.cap.max_send_sge = 2;  // a frame's header from the bounce ring, its payload in place
  init.cap.max_recv_sge = 1;
  qp_ = ibv_create_qp(pd_, &init);
  if (qp_ == nullptr) {
    fail(errno_text("ibv_create_qp", errno));
    return;
  }
  const int remote_write = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ring_mr_ = ibv_reg_mr(pd_, ring_.data(), ring_.size(), remote_write);
  bounce_mr_ = ibv_reg_mr(pd_, bounce_.data(), bounce_.size(), IBV_ACCESS_LOCAL_WRITE);
  slots_mr_ = ibv_reg_mr(pd_, slots_.data(), slots_.size(), IBV_ACCESS_LOCAL_WRITE);
  credit_mr_ =
      ibv_reg_mr(pd_, credit_buffer_.data(), credit_buffer_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (ring_mr_ == nullptr || bounce_mr_ == nullptr || slots_mr_ == nullptr ||
      credit_mr_ == nullptr) {
    fail(errno_text("ibv_reg_mr (memlock limit? ulimit -l)", errno));
    return;
  }
  // Pool windows are pinned memory on top of the rings: only where pinning is not capped
  // (root, or an unlimited memlock limit as plexusd's unit sets), lest windows eat the
  // limit that the next path's rings need.
  rlimit memlock{};
  const bool pinning_uncapped = ::geteuid() == 0 || (::getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 &&
                                                     memlock.rlim_cur == RLIM_INFINITY);
  if (sendable_ != nullptr && settings_.zero_copy_min_bytes != 0 && pinning_uncapped) {
    // The cache is the path's own, so its calls may reach the path.
    mr_cache_.emplace(
        MrCache::Calls{
            [this](std::byte* base, size_t bytes, MemoryKeys* keys, std::string* error) -> void* {
              // Read by this side's device only: local read access, nothing remote.
              ibv_mr* mr = ibv_reg_mr(pd_, base, bytes, 0);
              if (mr == nullptr) {
                // The memory cannot be pinned: it would fail again, so this path copies
                // from now on rather than retry a pin of a whole window per frame.
                zero_copy_refused_ = true;
                *error = errno_text("ibv_reg_mr of a pool window", errno);
                return nullptr;
              }
              keys->lkey = mr->lkey;
              keys->rkey = mr->rkey;
              return mr;
            },
            [](void* handle) { ibv_dereg_mr(static_cast<ibv_mr*>(handle)); }},
        settings_.max_registrations);
  }
  QpTransition to_init = init_transition(port_.port);
  if (int rc = ibv_modify_qp(qp_, &to_init.attr, to_init.mask); rc != 0) {
    fail(errno_text("moving the queue pair to INIT", rc));
    return;
  }
  for (uint64_t slot = 0; slot < settings_.receive_depth + kCreditReceives; ++slot) {
    if (!post_receive(slot)) return;
  }
  if (ibv_req_notify_cq(cq_, 0) != 0) {
    fail("ibv_req_notify_cq failed");
    return;
  }
  for (int fd : {channel_->fd, ctx->async_fd}) {
    const int flags = ::fcntl(fd, F_GETFL);
    ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
  for (int fd : {socket_.get(), channel_->fd, ctx->async_fd}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      fail(errno_text("epoll_ctl", errno));
      return;
    }
  }
  psn_ = std::random_device{}() & 0xffffff;
  Hello mine;
  mine.qpn = qp_->qp_num;
  mine.psn = psn_;
  mine.gid = port_.gid;
  mine.ring_address = reinterpret_cast<uint64_t>(ring_.data());
  mine.ring_rkey = ring_mr_->rkey;
  mine.ring_bytes = ring_.size();
  mine.receive_depth = settings_.receive_depth;
  mine.mtu = port_.active_mtu;
  const auto bytes = encode_hello(mine);
  // 64 bytes into a connected socket's empty buffer: they go at once, or the path fails.
  if (::send(socket_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(bytes.size())) {
    fail(errno_text("sending the RDMA setup", errno));
    return;
  }
  last_heard_ = Clock::now();  // pinning the rings is not the network's silence
}

bool RdmaPath::post_receive(uint64_t slot) {
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(slots_.data() + slot * kReceiveSlotBytes);
  sge.length = kReceiveSlotBytes;
  sge.lkey = slots_mr_->lkey;
  ibv_recv_wr wr{};
  wr.wr_id = wr_id(kReceive, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) return fail(errno_text("ibv_post_recv", rc));
  return true;
}

bool RdmaPath::connect_queue_pair() {
  if (std::string why = decode_hello(peer_hello_bytes_.data(), &peer_); !why.empty()) {
    return fail(why);
  }
  // The queue pair goes where the authenticated socket goes, nowhere else: the GID must be
  // the IPv4 address the socket's peer has.
  sockaddr_in peer_address{};
  socklen_t peer_len = sizeof peer_address;
  ibv_gid expected{};
  expected.raw[10] = 0xff;
  expected.raw[11] = 0xff;
  if (::getpeername(socket_.get(), reinterpret_cast<sockaddr*>(&peer_address), &peer_len) != 0 ||
      peer_address.sin_family != AF_INET) {
    return fail("the path's socket has no IPv4 peer");
  }
  std::memcpy(expected.raw + 12, &peer_address.sin_addr.s_addr, 4);
  if (std::memcmp(expected.raw, peer_.gid.raw, sizeof expected.raw) != 0) {
    return fail("the peer's RDMA GID " + gid_text(peer_.gid) + " is not its address " +
                gid_text(expected));
  }
  if (peer_.ring_bytes < wire::kDataFrameHeaderBytes + limits_.max_payload_bytes) {
    return fail("the peer's receive ring (" + std::to_string(peer_.ring_bytes) +
                " bytes) cannot hold the largest frame");
  }
  remote_ring_.emplace(peer_.ring_bytes);
  // One of the peer's receives is kept for this side's credit messages; of the send queue,
  // one entry for credit and one for a liveness probe.
  window_ = SendWindow(peer_.receive_depth - 1, settings_.send_depth - 2);
  QpTransition to_rtr = rtr_transition(peer_, port_.port, port_.gid_index, port_.active_mtu);
  // RoCE resolves the peer's MAC here; under load that can take longer than the kernel's
  // one second (ETIMEDOUT) though the peer is right there: a few more tries.
  int rtr = ETIMEDOUT;
  for (int attempt = 0; attempt < 3 && rtr == ETIMEDOUT; ++attempt) {
    rtr = ibv_modify_qp(qp_, &to_rtr.attr, to_rtr.mask);
  }
  if (rtr != 0) {
    return fail(errno_text("moving the queue pair to RTR (peer " + gid_text(peer_.gid) + ")", rtr));
  }
  QpTransition to_rts = rts_transition(settings_.ack_timeout, settings_.retry_count, psn_);
  if (int rc = ibv_modify_qp(qp_, &to_rts.attr, to_rts.mask); rc != 0) {
    return fail(errno_text("moving the queue pair to RTS", rc));
  }
  if (::send(socket_.get(), &kReadyByte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    return fail(errno_text("sending ready on the path's socket", errno));
  }
  ready_sent_ = true;
  return true;
}

bool RdmaPath::read_socket() {
  for (;;) {
    std::byte buffer[kHelloBytes];
    size_t want = sizeof buffer;
    if (peer_hello_read_ < kHelloBytes)
      want = kHelloBytes - peer_hello_read_;
    else if (!peer_ready_)
      want = 1;
    const ssize_t n = ::recv(socket_.get(), buffer, want, MSG_DONTWAIT);
    if (n == 0) {
      peer_closed_ = true;
      return fail(state_ == State::kSetup
                      ? "the peer closed the connection during the RDMA setup"
                      : "the peer closed the path's connection (its daemon stopped or gave this "
                        "node up)");
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      if (errno == EINTR) continue;
      return fail(errno_text("recv on the path's socket", errno));
    }
    last_heard_ = Clock::now();
    if (peer_hello_read_ < kHelloBytes) {
      std::memcpy(peer_hello_bytes_.data() + peer_hello_read_, buffer, static_cast<size_t>(n));
      peer_hello_read_ += static_cast<size_t>(n);
      if (peer_hello_read_ == kHelloBytes && !connect_queue_pair()) return false;
      continue;
    }
    if (!peer_ready_ && n == 1 && buffer[0] == kReadyByte) {
      peer_ready_ = true;
      state_ = State::kReady;
      pump();
      // The peer's first frames may have landed before this byte (RDMA and the socket are
      // different roads): the credit they earned could not go before now, and the peer may
      // be waiting for it.
      if (!maybe_send_credit(true)) return false;
      continue;
    }
    return fail("unexpected bytes from the peer on the path's socket after the RDMA setup");
  }
}

bool RdmaPath::on_readable(size_t max_bytes) {
  if (failed()) return false;
  if (state_ == State::kSetup && Clock::now() - started_ > settings_.setup_timeout) {
    return fail("the RDMA setup did not finish within " +
                std::to_string(settings_.setup_timeout.count()) + " ms");
  }
  if (!read_socket()) return false;
  if (!handle_async_events()) return false;
  // A pool whose session went is unpinned now, not at this path's next large frame (a
  // standby backup may send none for a long time).
  if (mr_cache_) forget_withdrawn_regions();
  if (!handle_completions(max_bytes)) return false;
  return !failed();
}

bool RdmaPath::handle_async_events() {
  ibv_async_event event{};
  while (ibv_get_async_event(port_.context.get(), &event) == 0) {
    std::string why;
    switch (event.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        if (event.element.qp == qp_) why = ibv_event_type_str(event.event_type);
        break;
      case IBV_EVENT_PORT_ERR:
        if (event.element.port_num == port_.port) why = "the port went down (IBV_EVENT_PORT_ERR)";
        break;
      case IBV_EVENT_DEVICE_FATAL:
        why = "the device failed (IBV_EVENT_DEVICE_FATAL)";
        break;
      case IBV_EVENT_CQ_ERR:
        if (event.element.cq == cq_) why = "the completion queue overran (IBV_EVENT_CQ_ERR)";
        break;
      default:
        break;
    }
    ibv_ack_async_event(&event);
    if (!why.empty()) return fail(why);
  }
  return true;
}

bool RdmaPath::handle_completions(size_t max_bytes) {
  ibv_cq* event_cq = nullptr;
  void* context = nullptr;
  unsigned events = 0;
  while (ibv_get_cq_event(channel_, &event_cq, &context) == 0) ++events;
  if (events > 0) {
    ibv_ack_cq_events(cq_, events);
    if (ibv_req_notify_cq(cq_, 0) != 0) return fail("ibv_req_notify_cq failed");
  }
  // After re-arming, everything already in the queue is taken here: a completion that came
  // before the arm raises no event, so none may be left for later. (`max_bytes`, the links'
  // fairness bound, is not needed: the ring bounds what one call can find.)
  (void)max_bytes;
  ibv_wc wcs[32];
  for (;;) {
    const int n = ibv_poll_cq(cq_, 32, wcs);
    if (n < 0) return fail("ibv_poll_cq failed");
    if (n == 0) break;
    last_heard_ = Clock::now();
    for (int i = 0; i < n; ++i) {
      if (!handle_completion(wcs[i])) return false;
    }
  }
  if (!maybe_send_credit(true)) return false;
  pump();
  return !failed();
}

bool RdmaPath::handle_completion(const ibv_wc& wc) {
  const Completion c =
      classify_completion(wc, settings_.receive_depth + kCreditReceives, slots_.data(), kRingAlign);
  switch (c.kind) {
    case Completion::Kind::kFailed:
      return fail(c.error);
    case Completion::Kind::kFrameWritten: {
      SendWindow::Done done{};
      std::string why;
      if (!window_.completed(&done, &why)) return fail(why);
      bounce_space_.on_credit(done.bounce_end);
      if (!pins_in_flight_.empty()) pins_in_flight_.pop_front();  // its window may go now
      posted_bytes_ -= wire::kDataFrameHeaderBytes + done.payload_bytes;
      if (callbacks_.on_sent) callbacks_.on_sent(done.token, done.payload_bytes);
      return !failed();
    }
    case Completion::Kind::kCreditSent:
      credit_in_flight_ = false;
      return true;
    case Completion::Kind::kProbeWritten:
      probe_in_flight_ = false;
      return true;
    case Completion::Kind::kFrameArrived:
      return handle_frame(c);
    case Completion::Kind::kCreditArrived:
      if (!remote_ring_) return fail("credit from the peer before its setup");
      if (std::string why = remote_ring_->on_credit(c.credit.ring_consumed); !why.empty()) {
        return fail(why);
      }
      if (std::string why = window_.peer_consumed(c.credit.frames_consumed); !why.empty()) {
        return fail(why);
      }
      return post_receive(c.slot);
  }
  return fail("a completion of no known kind");  // unreachable: every kind returns above
}

bool RdmaPath::handle_frame(const Completion& c) {
  const uint64_t offset = c.ring_offset;
  if (std::string why = local_ring_.check_start(offset); !why.empty()) return fail(why);
  const std::span<const std::byte, wire::kDataFrameHeaderBytes> header_bytes(
      ring_.data() + offset, wire::kDataFrameHeaderBytes);
  const wire::DecodedHeader decoded = wire::decode_data_frame_header(header_bytes, limits_);
  if (!decoded.ok()) return fail("a frame with a bad header: " + decoded.error);
  const uint64_t bytes = wire::kDataFrameHeaderBytes + decoded.header.length;
  if (c.bytes != bytes) {
    return fail("a frame write of " + std::to_string(c.bytes) + " bytes whose header says " +
                std::to_string(bytes));
  }
  if (std::string why = local_ring_.consume(offset, bytes); !why.empty()) return fail(why);
  bytes_received_ += bytes;
  ++frames_consumed_;
  // The frame stays in the ring until credit for it goes back, after this call.
  std::string refused = callbacks_.on_frame(
      decoded.header,
      std::span<const std::byte>(ring_.data() + offset + wire::kDataFrameHeaderBytes,
                                 decoded.header.length));
  if (!refused.empty()) return fail(refused);
  if (!post_receive(c.slot)) return false;
  return maybe_send_credit(false);
}

bool RdmaPath::maybe_send_credit(bool force) {
  if (credit_in_flight_ || state_ != State::kReady) return true;
  const bool owed = local_ring_.consumed() != credit_reported_bytes_ ||
                    frames_consumed_ != credit_reported_frames_;
  if (!owed || (!force && !local_ring_.credit_due(credit_reported_bytes_))) return true;
  encode_credit(Credit{local_ring_.consumed(), frames_consumed_}, credit_buffer_.data());
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uint64_t>(credit_buffer_.data());
  sge.length = kCreditBytes;
  sge.lkey = credit_mr_->lkey;
  ibv_send_wr wr{};
  wr.wr_id = wr_id(kCreditSend, 0);
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) {
    return fail(errno_text("posting credit", rc));
  }
  credit_in_flight_ = true;
  credit_reported_bytes_ = local_ring_.consumed();
  credit_reported_frames_ = frames_consumed_;
  return true;
}

// Frames waiting while nothing is posted (the peer's ring full, its credit not coming)
// would leave a dead peer unnoticed: no work request, no retries to run out. A zero-length
// RDMA write needs no ring space and no receive, but the peer's device must acknowledge
// it, so at most every 100 ms (as frames keep being queued: the channel's heartbeats) one
// goes, and a peer that is gone fails the path when its retries run out.
void RdmaPath::probe_if_stalled() {
  if (state_ != State::kReady || pending_.empty() || window_.outstanding() != 0 ||
      probe_in_flight_ || Clock::now() - last_probe_ < std::chrono::milliseconds(100)) {
    return;
  }
  ibv_send_wr wr{};
  wr.wr_id = wr_id(kProbeWrite, 0);
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.num_sge = 0;
  wr.wr.rdma.remote_addr = peer_.ring_address;
  wr.wr.rdma.rkey = peer_.ring_rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) {
    fail(errno_text("posting a liveness probe", rc));
    return;
  }
  probe_in_flight_ = true;
  last_probe_ = Clock::now();
}

void RdmaPath::pump() {
  pump_frames();
  probe_if_stalled();
}

void RdmaPath::pump_frames() {
  while (state_ == State::kReady && !pending_.empty() && window_.can_post()) {
    const Pending& frame = pending_.front();
    const uint64_t bytes = wire::kDataFrameHeaderBytes + frame.payload.size();
    // At least one write is always allowed, whatever the limit.
    if (posted_limit_ != 0 && posted_bytes_ != 0 && posted_bytes_ + bytes > posted_limit_) return;
    if (bytes > remote_ring_->size() || bytes > bounce_space_.size()) {
      fail("a frame of " + std::to_string(bytes) + " bytes is larger than the rings");
      return;
    }
    const auto slot = remote_ring_->place(bytes);
    if (!slot) return;  // the peer's ring is full: its credit brings us back
    // In place: only the header is staged, the payload is the second scatter entry.
    MrCache::Pin pin = pin_in_place(frame.payload);
    const uint64_t staged = pin ? wire::kDataFrameHeaderBytes : bytes;
    const auto bounce = bounce_space_.place(staged);
    if (!bounce) return;  // writes in flight hold the bounce ring: their completions do
    std::byte* out = bounce_.data() + bounce->offset;
    wire::encode_data_frame_header(frame.header, std::span<std::byte, wire::kDataFrameHeaderBytes>(
                                                     out, wire::kDataFrameHeaderBytes));
    if (!pin && !frame.payload.empty()) {
      std::memcpy(out + wire::kDataFrameHeaderBytes, frame.payload.data(), frame.payload.size());
    }
    std::array<ibv_sge, 2> sge{};
    sge[0].addr = reinterpret_cast<uint64_t>(out);
    sge[0].length = static_cast<uint32_t>(staged);
    sge[0].lkey = bounce_mr_->lkey;
    if (pin) {
      sge[1].addr = reinterpret_cast<uint64_t>(frame.payload.data());
      sge[1].length = static_cast<uint32_t>(frame.payload.size());
      sge[1].lkey = pin.keys().lkey;
    }
    ibv_send_wr wr{};
    wr.wr_id = wr_id(kFrameWrite, 0);
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(slot->offset / kRingAlign));
    wr.sg_list = sge.data();
    wr.num_sge = pin ? 2 : 1;
    wr.wr.rdma.remote_addr = peer_.ring_address + slot->offset;
    wr.wr.rdma.rkey = peer_.ring_rkey;
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(qp_, &wr, &bad); rc != 0) {
      fail(errno_text("posting a frame", rc));
      return;
    }
    remote_ring_->commit(*slot, bytes);
    bounce_space_.commit(*bounce, staged);
    window_.posted(frame.token, frame.payload.size(), bounce_space_.written());
    if (pin) in_place_bytes_ += frame.payload.size();
    pins_in_flight_.push_back(std::move(pin));
    pending_bytes_ -= bytes;
    posted_bytes_ += bytes;
    bytes_sent_ += bytes;
    pending_.pop_front();
  }
}

// The pinned registration of the pool window holding `payload`, or an empty pin: the payload
// is then copied (too small to be worth it, not in an announced pool, not wholly inside its
// window, every window held, or a registration failed once: copying is always correct, only
// slower). Withdrawn pools' windows are dropped in on_readable.
MrCache::Pin RdmaPath::pin_in_place(std::span<const std::byte> payload) {
  if (!mr_cache_ || zero_copy_refused_ || payload.size() < settings_.zero_copy_min_bytes) {
    return {};
  }
  const auto region = sendable_->find(payload.data(), payload.size());
  if (!region) return {};
  const uint64_t stride = std::max<uint64_t>(settings_.registration_window_bytes / 2, 4096);
  const uint64_t offset = static_cast<uint64_t>(payload.data() - region->base);
  const uint64_t window_offset = offset / stride * stride;
  const uint64_t window_bytes = std::min<uint64_t>(2 * stride, region->bytes - window_offset);
  if (offset + payload.size() > window_offset + window_bytes) return {};
  std::string why;
  return mr_cache_->lookup(region->id, region->base + window_offset,
                           static_cast<size_t>(window_bytes), &why);
}

// A pool whose session went may be mapped again at the same address under a new id: the
// old id's windows must never serve it, and their pinned pages go back.
void RdmaPath::forget_withdrawn_regions() {
  const uint64_t withdrawals = sendable_->withdrawals();
  if (withdrawals == withdrawals_seen_) return;
  withdrawals_seen_ = withdrawals;
  for (uint64_t owner : mr_cache_->owners()) {
    if (!sendable_->holds(owner)) mr_cache_->invalidate(owner);
  }
}

}  // namespace

PathOpener rdma_path_opener(int fd, RdmaSettings settings,
                            std::shared_ptr<const SendableMemory> sendable) {
  auto owned = std::make_shared<common::UniqueFd>(fd);
  return [owned, settings, sendable](const wire::DataFrameLimits& limits,
                                     DataPath::Callbacks callbacks) -> std::unique_ptr<DataPath> {
    return std::make_unique<RdmaPath>(owned->release(), settings, sendable, limits,
                                      std::move(callbacks));
  };
}

}  // namespace plexus::transports::rdma
