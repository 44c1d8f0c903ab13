// One verbs object and the call that frees it (ibv_dealloc_pd, ibv_destroy_qp, ...): whoever
// holds verbs objects declares them in the reverse of the order the device needs them freed,
// and writes no destructor of its own (tests give fakes with recording deleters).
#pragma once

#include <memory>

namespace plexus::transports::rdma {

template <typename T>
using VerbsPtr = std::unique_ptr<T, int (*)(T*)>;

}  // namespace plexus::transports::rdma
