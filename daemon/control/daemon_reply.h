// The root of a reply to a client's request: every reply carries the request's id, by which
// libplexus and plexusctl match it to the call waiting for it.
#pragma once

#include <capnp/message.h>

#include <cstdint>

#include "shm/control.capnp.h"

namespace plexus::daemon {

inline shm::control::DaemonMessage::Builder daemon_reply(capnp::MessageBuilder& message,
                                                         uint32_t request_id) {
  auto root = message.initRoot<shm::control::DaemonMessage>();
  root.setRequestId(request_id);
  return root;
}

}  // namespace plexus::daemon
