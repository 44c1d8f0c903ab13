#include "transports/rdma/path_verbs.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "transports/rdma/errno_text.h"
#include "transports/rdma/qp_transitions.h"
#include "transports/rdma/work_completion.h"

namespace plexus::transports::rdma {

Pages::Pages(size_t bytes) : bytes_(bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  base_ = p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

Pages::~Pages() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

PathVerbs::PathVerbs(const RdmaSettings& settings)
    : ring(settings.ring_bytes),
      bounce(settings.bounce_bytes),
      slots(static_cast<size_t>(receive_slots(settings)) * kReceiveSlotBytes),
      credit(kCreditBufferBytes) {}

std::string PathVerbs::open(VerbsDevices::Found found, PinnedBudget::Hold held,
                            const RdmaSettings& settings,
                            std::shared_ptr<const SendableMemory> sendable) {
  port = std::move(found.port);
  device = std::move(found.device);
  pinned = std::move(held);
  ibv_context* ctx = port.context.get();
  if (ring.data() == nullptr || bounce.data() == nullptr || slots.data() == nullptr ||
      credit.data() == nullptr) {
    return "no memory for the path's rings (" + std::to_string(settings.ring_bytes) + " + " +
           std::to_string(settings.bounce_bytes) + " bytes)";
  }
  ibv_pd* pd = device->pd();
  channel.reset(ibv_create_comp_channel(ctx));
  const int cqe = static_cast<int>(settings.send_depth + receive_slots(settings) + 1);
  if (channel != nullptr) cq.reset(ibv_create_cq(ctx, cqe, nullptr, channel.get(), 0));
  if (cq == nullptr) return errno_text("creating the completion queue", errno);
  ibv_qp_init_attr init{};
  init.send_cq = cq.get();
  init.recv_cq = cq.get();
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = settings.send_depth;
  init.cap.max_recv_wr = static_cast<uint32_t>(receive_slots(settings));
  init.cap.max_send_sge = 2;  // a frame's header from the bounce ring, its payload in place
  init.cap.max_recv_sge = 1;
  qp.reset(ibv_create_qp(pd, &init));
  if (qp == nullptr) return errno_text("ibv_create_qp", errno);
  wake = common::UniqueFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake) return errno_text("eventfd", errno);
  watcher = VerbsDevice::Watcher{
      .qp = qp.get(), .cq = cq.get(), .port = port.port, .wake_fd = wake.get(), .why = {}};
  watch = device->watch(&watcher);
  const int remote_write = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  ring_mr.reset(ibv_reg_mr(pd, ring.data(), ring.size(), remote_write));
  bounce_mr.reset(ibv_reg_mr(pd, bounce.data(), bounce.size(), IBV_ACCESS_LOCAL_WRITE));
  slots_mr.reset(ibv_reg_mr(pd, slots.data(), slots.size(), IBV_ACCESS_LOCAL_WRITE));
  credit_mr.reset(ibv_reg_mr(pd, credit.data(), credit.size(), IBV_ACCESS_LOCAL_WRITE));
  if (ring_mr == nullptr || bounce_mr == nullptr || slots_mr == nullptr || credit_mr == nullptr) {
    return errno_text("ibv_reg_mr (memlock limit? ulimit -l)", errno);
  }
  // Pool windows are pinned memory on top of the rings: only where pinning is not capped
  // (root, or an unlimited memlock limit as plexusd's unit sets), lest windows eat the
  // limit that the next path's rings need.
  rlimit memlock{};
  const bool pinning_uncapped = ::geteuid() == 0 || (::getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 &&
                                                     memlock.rlim_cur == RLIM_INFINITY);
  if (sendable != nullptr && settings.zero_copy_min_bytes != 0 && pinning_uncapped) {
    pool_windows.emplace(std::move(sendable), device->windows(), settings.zero_copy_min_bytes,
                         settings.registration_window_bytes);
  }
  QpTransition to_init = init_transition(port.port);
  if (int rc = ibv_modify_qp(qp.get(), &to_init.attr, to_init.mask); rc != 0) {
    return errno_text("moving the queue pair to INIT", rc);
  }
  return {};
}

std::string PathVerbs::connect(const Hello& peer, const RdmaSettings& settings, uint32_t psn) {
  QpTransition to_rtr = rtr_transition(peer, port.port, port.gid_index, port.active_mtu);
  // RoCE resolves the peer's MAC here; under load that can take longer than the kernel's
  // one second (ETIMEDOUT) though the peer is right there: a few more tries.
  int rtr = ETIMEDOUT;
  for (int attempt = 0; attempt < 3 && rtr == ETIMEDOUT; ++attempt) {
    rtr = ibv_modify_qp(qp.get(), &to_rtr.attr, to_rtr.mask);
  }
  if (rtr != 0) {
    return errno_text("moving the queue pair to RTR (peer " + gid_text(peer.gid) + ")", rtr);
  }
  QpTransition to_rts = rts_transition(settings.ack_timeout, settings.retry_count, psn);
  if (int rc = ibv_modify_qp(qp.get(), &to_rts.attr, to_rts.mask); rc != 0) {
    return errno_text("moving the queue pair to RTS", rc);
  }
  return {};
}

std::string PathVerbs::move_to_error() {
  QpTransition to_error = error_transition();
  const int rc = ibv_modify_qp(qp.get(), &to_error.attr, to_error.mask);
  return rc == 0 ? std::string() : errno_text("moving the queue pair to the error state", rc);
}

std::string PathVerbs::fatal_async_event() {
  uint64_t told = 0;
  while (::read(wake.get(), &told, sizeof told) > 0) {
  }
  device->take_async_events();
  return watcher.why;
}

}  // namespace plexus::transports::rdma
