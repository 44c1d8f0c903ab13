#include "daemon/peers/rdma_offers.h"

#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <string>

#include "common/socket_address.h"
#ifdef PLEXUS_HAVE_RDMA
#include "transports/rdma/verbs_devices.h"
#include "transports/rdma/verbs_port.h"
#endif

namespace plexus::daemon {

RdmaOffers::RdmaOffers(DataTransport transport, const transports::rdma::RdmaSettings& rdma)
    : transport_(transport),
      pinned_bytes_(transports::rdma::path_pinned_bytes(rdma)),
      budget_(std::make_shared<transports::rdma::PinnedBudget>(rdma.pinned_max_bytes)) {
#ifdef PLEXUS_HAVE_RDMA
  devices_ = std::make_shared<transports::rdma::VerbsDevices>(budget_, rdma.max_registrations);
#endif
}

bool RdmaOffers::offers(int fd, transports::rdma::PinnedBudget::Hold* reserved) {
  if (transport_ == DataTransport::kTcp) return false;
  sockaddr_in local{};
  socklen_t len = sizeof local;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
      local.sin_family != AF_INET) {
    return false;
  }
  auto [it, first] = verdicts_.try_emplace(local.sin_addr.s_addr, false);
  if (first) {
#ifdef PLEXUS_HAVE_RDMA
    auto port = transports::rdma::find_verbs_port(local.sin_addr.s_addr);
    std::string why = port.error();
    if (port && !port->active)
      why = port->device + " port " + std::to_string(port->port) + " is not active";
    // Each path pins its rings: past RLIMIT_MEMLOCK (without CAP_IPC_LOCK, as root has) the
    // registration would fail on every reconnect, where TCP would work.
    rlimit memlock{};
    if (port && port->active && ::geteuid() != 0 && ::getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 &&
        memlock.rlim_cur != RLIM_INFINITY && memlock.rlim_cur < pinned_bytes_) {
      why = "RLIMIT_MEMLOCK (" + std::to_string(memlock.rlim_cur) + " bytes) is below the " +
            std::to_string(pinned_bytes_) +
            " one RDMA path pins (LimitMEMLOCK= in the unit, ulimit -l)";
    }
    it->second = port && why.empty();
    if (it->second) {
      spdlog::info("peers: {} has verbs port {} port {}: data connections over it offer RDMA",
                   common::address_text(reinterpret_cast<const sockaddr*>(&local)), port->device,
                   port->port);
    } else {
      spdlog::info("peers: no RDMA for {}: {}",
                   common::address_text(reinterpret_cast<const sockaddr*>(&local)), why);
    }
#endif
  }
  if (!it->second) return false;
  // The paths open (or offered) now leave room for one more path's rings (windows give way
  // to them): held from here, so that offers made at once cannot count on the same room.
  *reserved = {};  // a retried connection's earlier hold is not counted twice
  auto held = budget_->take(pinned_bytes_, transports::rdma::PinnedBudget::Use::kPath);
  const bool fits = held.ok();
  if (fits) *reserved = held.take();
  if (!fits) {
    sockaddr_storage remote{};
    socklen_t remote_len = sizeof remote;
    const bool named = ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_len) == 0;
    spdlog::debug(
        "peers: the data connection with {} is offered TCP only: {}",
        named ? common::address_text(reinterpret_cast<const sockaddr*>(&remote)) : std::string("?"),
        held.error());
  }
  if (fits == bound_spent_) {
    bound_spent_ = !fits;
    if (bound_spent_) {
      spdlog::warn(
          "peers: RDMA paths hold {} of --rdma-pinned-max-bytes {}: new data connections "
          "offer TCP only until some close (a path pins {})",
          budget_->held_by_paths(), budget_->max_bytes(), pinned_bytes_);
    } else {
      spdlog::info("peers: RDMA's pinned-memory bound has room again: data connections offer RDMA");
    }
  }
  return fits;
}

}  // namespace plexus::daemon
