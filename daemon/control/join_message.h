// A node's join as it travels to the communicator's root (node_control.capnp's Join): written
// by the joining node, and read, untrusted, by the root, which checks here what it can without
// the rendezvous (sizes, bounds) and the rest where it has the parent or the rendezvous. Pure:
// no I/O, no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/control/node_control.capnp.h"
#include "daemon/engine/comm.h"

namespace plexus::daemon {

// What a shrink's join carries (plexus_comm_shrink): the parent and whom it leaves out.
struct ShrinkOf {
  CommToken parent{};
  std::vector<int> excluded;  // ascending (the root checks)
};

struct JoinMessage {
  CommToken token{};
  int nranks = 0;
  std::vector<int> ranks;  // the sender's ranks that joined now
  uint32_t timeout_ms = 0;
  std::string algorithm;  // PLEXUS_ALGO of those ranks ("" = choose)
  std::optional<ShrinkOf> shrink;
};

// A token from a peer's message: its first 16 bytes, zero-filled (the caller checks the size).
CommToken token_of(capnp::Data::Reader data);

void write_join(node_control::Join::Builder out, const JoinMessage& join);
common::Result<JoinMessage> read_join(node_control::Join::Reader in);

}  // namespace plexus::daemon
