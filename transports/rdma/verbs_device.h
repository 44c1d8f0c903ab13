// One verbs device as this daemon's RDMA paths share it: the opened context, one protection
// domain, the client pool windows registered for zero-copy sends (window_cache.h)
// and the device's asynchronous events, each handed to the paths it concerns. Before, every
// path opened the device and made its own domain and window registrations: at a thousand
// peers that was a thousand contexts and up to 64 registered windows each. Every path over
// one of the device's ports holds it (a shared_ptr, verbs_devices.h); it closes when the last
// goes. A path's own queue pair, completion queue and rings stay the path's.
//
// Async events come on one descriptor per context, which every path over the device polls:
// whichever path reads them hands each to the paths it concerns (their queue pair or
// completion queue, their port, or all for a failed device) and wakes each through its own
// event descriptor, so that a path whose event another path read still fails at once.
//
// Members are declared in the reverse of the order they are freed in: the window
// registrations, then the protection domain, then the context. Called only by the thread
// that runs the paths (the links' event loop).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/rdma/pinned_budget.h"
#include "transports/rdma/verbs_ptr.h"
#include "transports/rdma/window_cache.h"

namespace plexus::transports::rdma {

class VerbsDevice : public std::enable_shared_from_this<VerbsDevice> {
 public:
  // A path's interest in the device's async events. `why` gets the first event that fails the
  // path; `wake_fd` (an eventfd the path polls; -1: none) is written when it does.
  struct Watcher {
    const ibv_qp* qp = nullptr;
    const ibv_cq* cq = nullptr;
    uint8_t port = 0;
    int wake_fd = -1;
    std::string why;
  };

  // Opens a protection domain on `context` (the device `name`); window registrations take
  // their bytes from `budget`, at most `max_windows` at once. Null, with `why` set, if the
  // domain cannot be made.
  static std::shared_ptr<VerbsDevice> open(std::string name, std::shared_ptr<ibv_context> context,
                                           std::shared_ptr<PinnedBudget> budget,
                                           uint32_t max_windows, std::string* why);
  // From parts made elsewhere (tests give fakes): registrations go through `window_calls`.
  VerbsDevice(std::string name, std::shared_ptr<ibv_context> context, VerbsPtr<ibv_pd> pd,
              MrCache::Calls window_calls, uint32_t max_windows,
              std::shared_ptr<PinnedBudget> budget);
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  const std::string& name() const { return name_; }
  const std::shared_ptr<ibv_context>& context() const { return context_; }
  ibv_pd* pd() const { return pd_.get(); }
  // The device's window registrations, kept alive with the device by whoever holds this.
  std::shared_ptr<WindowCache> windows();
  // Registered windows no work request holds are dropped: the bytes freed.
  uint64_t drop_unused_windows() { return windows_.drop_unpinned(); }

  // `watcher` hears the events that concern it until the Watch goes (it must outlive it).
  class Watch {
   public:
    Watch() = default;
    ~Watch();
    Watch(Watch&& other) noexcept;
    Watch& operator=(Watch&& other) noexcept;
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    friend class VerbsDevice;
    VerbsDevice* device_ = nullptr;
    Watcher* watcher_ = nullptr;
  };
  Watch watch(Watcher* watcher);

  // Reads every async event the device holds (its descriptor is non-blocking) and hands each on.
  void take_async_events();
  // One event, to the watchers it concerns.
  void dispatch(const ibv_async_event& event);
  size_t watchers() const { return watchers_.size(); }
  // The device reported itself failed (IBV_EVENT_DEVICE_FATAL): no new path goes on it.
  bool failed() const { return failed_; }

 private:
  static void tell(Watcher& watcher, std::string why);

  std::string name_;
  std::shared_ptr<ibv_context> context_;  // freed last
  VerbsPtr<ibv_pd> pd_;
  WindowCache windows_;
  std::vector<Watcher*> watchers_;
  bool failed_ = false;
};

}  // namespace plexus::transports::rdma
