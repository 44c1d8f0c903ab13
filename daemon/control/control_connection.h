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
  uint64_t id = 0;  // the session's, from the accept on
  PeerCredentials creds;
  // Made by an accepted hello: the control thread's const view (Session's engine state
  // is the engine thread's alone).
  std::shared_ptr<const Session> session;
  std::string process_name;  // from its hello, for log lines before `session` exists
  common::FrameDecoder decoder{shm::kMaxClientFrameBytes};
  std::vector<common::UniqueFd> received_fds;
  bool greeted = false;     // a hello was accepted: `session` is set
  bool rank_hello = false;  // it said it is a rank: its end is logged at info
  bool closing = false;
};

}  // namespace plexus::daemon
