// The client's end of the control socket: request/reply calls with request ids, safe
// from several threads at once (comm init blocks while other threads keep calling).
#pragma once

#include <capnp/message.h>

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "shm/control.capnp.h"
#include "shm/framing.h"

namespace plexus::client {

// No daemon answers on the socket.
class DaemonUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The daemon closed the connection or it failed while this process used it.
class DaemonLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Reply {
  kj::Array<capnp::word> words;
  std::vector<common::UniqueFd> fds;
};

class ControlChannel {
 public:
  // Connects, retrying for up to retry_ms while the socket is absent or refuses
  // (a daemon that is still starting). Throws DaemonUnavailable with a sentence.
  ControlChannel(const std::string& socket_path, int retry_ms);

  // Sends `message` (its requestId is set here) with optional fds and waits for the
  // reply with the same id. Throws DaemonLost if the daemon is gone.
  Reply call(capnp::MallocMessageBuilder& message, std::span<const int> fds = {});

  int fd() const { return fd_.get(); }
  const std::string& socket_path() const { return socket_path_; }

 private:
  void read_one_frame(std::unique_lock<std::mutex>& lock);

  std::string socket_path_;
  common::UniqueFd fd_;
  std::mutex send_mutex_;
  std::mutex mutex_;
  std::condition_variable replies_cv_;
  std::map<uint32_t, Reply> replies_;
  uint32_t next_request_id_ = 1;
  bool reader_active_ = false;
  std::string dead_reason_;
  common::FrameDecoder decoder_{shm::kMaxDaemonFrameBytes};
  std::vector<common::UniqueFd> pending_fds_;
};

}  // namespace plexus::client
