// One client connection of the control thread, private to daemon/control (control_server.cc
// and the files that handle its requests).
#pragma once

#include <uv.h>

#include <memory>
#include <vector>

#include "common/frame_codec.h"
#include "common/unique_fd.h"
#include "daemon/control/control_server.h"
#include "daemon/engine/session.h"
#include "shm/framing.h"

namespace plexus::daemon {

struct ControlServer::Connection {
  ControlServer* server = nullptr;
  uv_poll_t poll{};
  common::UniqueFd fd;
  std::shared_ptr<Session> session;
  common::FrameDecoder decoder{shm::kMaxClientFrameBytes};
  std::vector<common::UniqueFd> received_fds;
  bool greeted = false;
  bool closing = false;
};

}  // namespace plexus::daemon
