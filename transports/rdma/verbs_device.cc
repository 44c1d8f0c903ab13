#include "transports/rdma/verbs_device.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "transports/rdma/errno_text.h"

namespace plexus::transports::rdma {

std::shared_ptr<VerbsDevice> VerbsDevice::open(std::string name,
                                               std::shared_ptr<ibv_context> context,
                                               std::shared_ptr<PinnedBudget> budget,
                                               uint32_t max_windows, std::string* why) {
  // take_async_events reads until nothing is left.
  const int flags = ::fcntl(context->async_fd, F_GETFL);
  ::fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK);
  VerbsPtr<ibv_pd> pd(ibv_alloc_pd(context.get()), ibv_dealloc_pd);
  if (pd == nullptr) {
    *why = errno_text("creating the protection domain on " + name, errno);
    return nullptr;
  }
  ibv_pd* domain = pd.get();
  MrCache::Calls calls{
      [domain](std::byte* base, size_t bytes) -> common::Result<MrCache::Registration> {
        // Read by this side's device only: local read access, nothing remote.
        ibv_mr* mr = ibv_reg_mr(domain, base, bytes, 0);
        if (mr == nullptr) return common::fail(errno_text("ibv_reg_mr of a pool window", errno));
        return MrCache::Registration{mr, MemoryKeys{mr->lkey, mr->rkey}};
      },
      [](void* handle) { ibv_dereg_mr(static_cast<ibv_mr*>(handle)); }};
  return std::make_shared<VerbsDevice>(std::move(name), std::move(context), std::move(pd),
                                       std::move(calls), max_windows, std::move(budget));
}

VerbsDevice::VerbsDevice(std::string name, std::shared_ptr<ibv_context> context,
                         VerbsPtr<ibv_pd> pd, MrCache::Calls window_calls, uint32_t max_windows,
                         std::shared_ptr<PinnedBudget> budget)
    : name_(std::move(name)),
      context_(std::move(context)),
      pd_(std::move(pd)),
      windows_(std::move(window_calls), max_windows, std::move(budget)) {}

std::shared_ptr<WindowCache> VerbsDevice::windows() {
  return std::shared_ptr<WindowCache>(shared_from_this(), &windows_);
}

VerbsDevice::Watch::~Watch() {
  if (device_ != nullptr) std::erase(device_->watchers_, watcher_);
}

VerbsDevice::Watch::Watch(Watch&& other) noexcept { *this = std::move(other); }

VerbsDevice::Watch& VerbsDevice::Watch::operator=(Watch&& other) noexcept {
  if (this != &other) {
    if (device_ != nullptr) std::erase(device_->watchers_, watcher_);
    device_ = std::exchange(other.device_, nullptr);
    watcher_ = std::exchange(other.watcher_, nullptr);
  }
  return *this;
}

VerbsDevice::Watch VerbsDevice::watch(Watcher* watcher) {
  watchers_.push_back(watcher);
  Watch w;
  w.device_ = this;
  w.watcher_ = watcher;
  return w;
}

void VerbsDevice::take_async_events() {
  ibv_async_event event{};
  while (ibv_get_async_event(context_.get(), &event) == 0) {
    dispatch(event);
    ibv_ack_async_event(&event);
  }
}

void VerbsDevice::tell(Watcher& watcher, std::string why) {
  if (!watcher.why.empty()) return;
  watcher.why = std::move(why);
  if (watcher.wake_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(watcher.wake_fd, &one, sizeof one);
  }
}

void VerbsDevice::dispatch(const ibv_async_event& event) {
  if (event.event_type == IBV_EVENT_DEVICE_FATAL) failed_ = true;
  for (Watcher* w : watchers_) {  // telling a watcher changes nothing in the list
    switch (event.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
        if (event.element.qp == w->qp) tell(*w, ibv_event_type_str(event.event_type));
        break;
      case IBV_EVENT_PORT_ERR:
        if (event.element.port_num == w->port) {
          tell(*w, "the port went down (IBV_EVENT_PORT_ERR)");
        }
        break;
      case IBV_EVENT_DEVICE_FATAL:
        tell(*w, "the device " + name_ + " failed (IBV_EVENT_DEVICE_FATAL)");
        break;
      case IBV_EVENT_CQ_ERR:
        if (event.element.cq == w->cq) tell(*w, "the completion queue overran (IBV_EVENT_CQ_ERR)");
        break;
      default:
        break;
    }
  }
}

}  // namespace plexus::transports::rdma
