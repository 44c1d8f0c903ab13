/* Preloaded into the Python steps of tools/gpu-check run (LD_PRELOAD): on SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE or SIGABRT, writes the native stack (libraries and offsets, to map with
 * addr2line against the build the bundle came from) to stderr, then dies of the same
 * signal. A lent GPU machine has no gdb, and a rank that dies of a signal in a library
 * otherwise leaves nothing behind. Installed first, so Python's faulthandler (which prints
 * the Python stack) runs before it and chains to it. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fatal(int sig) {
  static const char head[] = "crash_trace: fatal signal, native stack:\n";
  void* frames[64];
  (void)!write(2, head, sizeof(head) - 1);
  int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  void* warm[1];
  backtrace(warm, 1); /* loads libgcc_s now, not inside the handler */
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); ++i) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_ONSTACK;
    sigaction(sigs[i], &sa, NULL);
  }
}
