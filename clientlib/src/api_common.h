// What the C API's files share: the communicator handle it hands out, and guarded(), which
// runs a call's C++ body so that exceptions (no daemon, a daemon gone, out of memory) become
// result codes and the thread's last error.
#pragma once

#include <cstdlib>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "clientlib/control/control_channel.h"
#include "clientlib/src/client_context.h"
#include "clientlib/src/last_error.h"
#include "plexus/plexus.h"

// A communicator handle as the C API hands it out.
struct plexus_comm {
  std::shared_ptr<plexus::client::CommState> state;
};

namespace plexus::client {

// Runs fn, turning exceptions (daemon unavailable or gone, out of memory) into codes.
template <typename Fn>
plexus_result_t guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return fail(PLEXUS_ERR_NO_MEMORY, "out of memory in libplexus");
  } catch (const DaemonUnavailable& e) {
    return fail(PLEXUS_ERR_DAEMON_UNAVAILABLE, e.what());
  } catch (const DaemonLost& e) {
    return fail(PLEXUS_ERR_DAEMON_LOST, e.what());
  } catch (const std::exception& e) {
    return fail(PLEXUS_ERR_SYSTEM, e.what());
  }
}

// The daemon's answer to `call` when it is not the reply expected: its error, or a protocol
// error, as a result (and the thread's last error).
inline plexus_result_t refused(const char* call, shm::control::DaemonMessage::Reader root) {
  if (root.isError()) {
    return fail(static_cast<plexus_result_t>(root.getError().getCode()),
                std::string(call) + ": " + root.getError().getMessage().cStr());
  }
  return fail(PLEXUS_ERR_PROTOCOL, std::string(call) + ": unexpected reply from plexusd");
}

// How long a call that forms a communicator waits: PLEXUS_INIT_TIMEOUT_MS, else 60 s.
inline int init_timeout_ms() {
  const char* env = std::getenv("PLEXUS_INIT_TIMEOUT_MS");
  const int ms = env != nullptr ? std::atoi(env) : 0;
  return ms > 0 ? ms : 60000;
}

}  // namespace plexus::client
