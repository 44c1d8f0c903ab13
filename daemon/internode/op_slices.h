// Slices of an inter-node collective. A large collective runs as a sequence of smaller
// collectives of the same kind, each over an element range [first, first + count) of
// every per-rank block, a few in flight at once: one slice's local copies overlap another
// slice's network rounds, the rounds' barriers of one slice are filled by the others, and
// a node's scratch memory stays a few slices whatever the collective's size. Every node
// computes the same layout from the collective's arguments, so the slicing is part of
// the peer protocol: a data frame's step names its slice and message
// (transports/wire/frame_views.h, CollectiveStep).
#pragma once

#include <cstdint>
#include <string>

#include "daemon/algorithms/algorithm.h"
#include "transports/wire/frame_views.h"

namespace plexus::daemon {

using algo::kSliceWorkBytes;                   // the bytes a slice aims at (a protocol value)
using transports::wire::kMaxMessagesPerSlice;  // per peer
using transports::wire::kMaxSlices;
// Slices a node runs at once (local: nodes may differ).
inline constexpr uint32_t kSlicesInFlight = 4;

struct SliceLayout {
  uint64_t count = 0;            // elements per block of the whole collective
  uint64_t elems_per_slice = 0;  // every slice but the last
  uint64_t slices = 1;           // a collective of count 0 is one empty slice

  uint64_t first(uint64_t slice) const { return slice * elems_per_slice; }
  uint64_t count_of(uint64_t slice) const;
};

// `work_bytes`: the slice size to aim at (kSliceWorkBytes between daemons; tests use
// smaller ones). Blocks of allgather, reduce-scatter and alltoall are per rank, so their
// slices hold `nranks` pieces.
SliceLayout slice_layout(algo::Collective collective, uint64_t count, uint32_t elem_bytes,
                         int nranks, uint64_t work_bytes);

// Empty, or why `plan` cannot run as slices (more messages to one peer than a step holds).
std::string check_plan_sliceable(const algo::Plan& plan);

}  // namespace plexus::daemon
