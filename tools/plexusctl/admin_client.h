// plexusctl's connection to plexusd: an admin session that sends one request at a time
// and hands back the reply, or throws with a sentence naming the socket.
#pragma once

#include <capnp/serialize.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "clientlib/control/control_channel.h"
#include "shm/control.capnp.h"

namespace plexus::ctl {

// The daemon answered with an error (the message is its sentence).
class Refused : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class AdminClient {
 public:
  // Connects and says hello as an admin. Throws client::DaemonUnavailable when nothing
  // answers on `socket_path`.
  explicit AdminClient(const std::string& socket_path);

  // Sends the request `fill` builds and calls `use` with the reply (throws Refused when
  // the daemon refused it, client::DaemonLost when it went away).
  void call(const std::function<void(shm::control::ClientMessage::Builder)>& fill,
            const std::function<void(shm::control::DaemonMessage::Reader)>& use);

  const std::string& socket_path() const { return socket_path_; }

 private:
  std::string socket_path_;
  std::unique_ptr<client::ControlChannel> channel_;
};

}  // namespace plexus::ctl
