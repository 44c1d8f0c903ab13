// The control server's idle exit (--idle-exit-s): what a daemon started by libplexus itself
// runs with, so that it goes once nothing uses it.
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "daemon/control/control_server.h"

namespace plexus::daemon {

// Once a second: a connection resets the count; idle_exit_s seconds in a row with none ask
// the daemon to exit (once: the timer stops). A daemon whose weight store holds versions is
// not idle: a trainer that published and exited leaves them for rollouts yet to come.
void ControlServer::check_idle() {
  if (!connections_.empty()) {
    idle_seconds_ = 0;
    idle_held_said_ = false;
    return;
  }
  if (++idle_seconds_ < config_.idle_exit_s) return;
  if (std::string held = weights_.holding(); !held.empty()) {
    idle_seconds_ = 0;
    if (!idle_held_said_) {
      spdlog::info(
          "no client for {} s (--idle-exit-s), but staying for pulls yet to come: {} "
          "(SIGTERM stops it)",
          config_.idle_exit_s, held);
    }
    idle_held_said_ = true;
    return;
  }
  uv_timer_stop(&idle_timer_);
  // Take no one else from here on: the socket goes at once (a client arriving now starts a
  // new daemon rather than reaching one that is leaving), and stop() leaves the path alone.
  uv_poll_stop(&listen_poll_);
  ::unlink(config_.socket_path.c_str());
  socket_released_ = true;
  spdlog::info("no client for {} s (--idle-exit-s): exiting", config_.idle_exit_s);
  if (config_.on_idle) config_.on_idle();
}

}  // namespace plexus::daemon
