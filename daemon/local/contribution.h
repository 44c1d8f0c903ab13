// One rank's part of an op: its validated entry and where its buffers are mapped. The
// local and inter-node executors read only the entry and the two pointers; `session` is
// the engine's (engine/session.h), opaque here so that local/ depends on nothing above it.
#pragma once

#include <cstddef>

#include "shm/entry_validation.h"

namespace plexus::daemon {

class Session;

struct Contribution {
  Session* session = nullptr;
  int rank = -1;
  shm::ValidatedEntry entry;
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
};

}  // namespace plexus::daemon
