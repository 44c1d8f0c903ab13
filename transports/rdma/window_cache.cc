#include "transports/rdma/window_cache.h"

#include <utility>

namespace plexus::transports::rdma {
namespace {

// What the cache holds per registration: the device's handle and the bytes it holds of the
// budget (released when the registration goes).
struct Held {
  void* handle = nullptr;
  PinnedBudget::Hold hold;
};

}  // namespace

WindowCache::WindowCache(MrCache::Calls calls, size_t max_registrations,
                         std::shared_ptr<PinnedBudget> budget)
    : cache_(MrCache::Calls{
                 [refused = refused_, budget = std::move(budget),
                  register_region = std::move(calls.register_region)](
                     std::byte* base, size_t bytes) -> common::Result<MrCache::Registration> {
                   PinnedBudget::Hold hold;
                   if (budget != nullptr) {
                     auto taken = budget->take(bytes, PinnedBudget::Use::kWindow);
                     if (!taken.ok()) return common::fail(taken.error());  // for now, not for good
                     hold = taken.take();
                   }
                   auto registered = register_region(base, bytes);
                   if (!registered.ok()) {
                     *refused = true;
                     return common::fail(registered.error());
                   }
                   auto* held = new Held{registered->handle, std::move(hold)};
                   return MrCache::Registration{held, registered->keys};
                 },
                 [deregister = std::move(calls.deregister)](void* handle) {
                   auto* held = static_cast<Held*>(handle);
                   deregister(held->handle);
                   delete held;
                 }},
             max_registrations) {}

}  // namespace plexus::transports::rdma
