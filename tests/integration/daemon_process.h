// A real plexusd for integration tests: started from the built binary on a private
// socket in a fresh temp directory, stopped (and the directory removed) at the end.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace plexus::test {

class DaemonProcess {
 public:
  explicit DaemonProcess(std::vector<std::string> extra_args = {});
  ~DaemonProcess();
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;

  const std::string& socket_path() const { return socket_path_; }
  pid_t pid() const { return pid_; }
  // True while the daemon process is running (not exited, not a zombie).
  bool alive();
  // Sends SIGKILL and reaps it.
  void kill_now();
  // The daemon's log so far (stderr+stdout).
  std::string log() const;
  // Where it appends events (--events-file), unless the test passed its own.
  const std::string& events_path() const { return events_path_; }

 private:
  std::string dir_;
  std::string socket_path_;
  std::string log_path_;
  std::string events_path_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

}  // namespace plexus::test
