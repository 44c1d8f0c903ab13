#include "tools/plexus-bench/self_timeout.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace plexus::bench {
namespace {

// Written before the alarm is armed, read by the handler: only async-signal-safe calls.
char g_timeout_message[256];

void exit_on_alarm(int) {
  const ssize_t ignored = ::write(STDERR_FILENO, g_timeout_message, std::strlen(g_timeout_message));
  (void)ignored;
  ::_exit(124);  // as timeout(1)
}

}  // namespace

void arm_self_timeout(const std::string& message, unsigned seconds) {
  std::snprintf(g_timeout_message, sizeof(g_timeout_message), "%s\n", message.c_str());
  struct sigaction action {};
  action.sa_handler = exit_on_alarm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGALRM, &action, nullptr);
  ::alarm(seconds);
}

}  // namespace plexus::bench
