#include "clientlib/src/autostart.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"

extern char** environ;

namespace plexus::client {
namespace {

using Clock = std::chrono::steady_clock;

// How long a rank waits for another to finish starting the daemon, and for a daemon it
// started to listen: a start takes well under a second; these bound a stuck one.
constexpr auto kLockWait = std::chrono::seconds(30);
constexpr auto kReadyWait = std::chrono::seconds(20);
constexpr unsigned kDefaultIdleExitS = 300;

bool autostart_enabled() {
  const char* v = std::getenv("PLEXUS_AUTOSTART");
  if (v == nullptr) return true;
  const std::string s(v);
  return !(s == "0" || s == "off" || s == "false" || s == "no");
}

unsigned idle_exit_s() {
  const char* v = std::getenv("PLEXUS_AUTOSTART_IDLE_S");
  if (v == nullptr || *v == '\0') return kDefaultIdleExitS;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v, &end, 10);
  if (*end != '\0' || n == 0 || n > 86400) return kDefaultIdleExitS;
  return static_cast<unsigned>(n);
}

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::string directory_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// plexusd: $PLEXUSD; else beside the file this code was loaded from (libplexus.so,
// libnccl.so.2, the torch extension or a program), in an installed tree (lib/ or
// lib/plexus/ beside sbin/ and bin/) or the build tree (daemon/); else on PATH.
std::string find_plexusd(std::vector<std::string>* tried) {
  if (const char* env = std::getenv("PLEXUSD"); env != nullptr && *env != '\0') {
    tried->push_back(env);
    return executable(env) ? env : "";
  }
  Dl_info info{};
  // Only an absolute path says where this code lives (a static program's bare argv[0] would
  // make the search relative to the working directory).
  if (::dladdr(reinterpret_cast<void*>(&find_plexusd), &info) != 0 && info.dli_fname != nullptr &&
      info.dli_fname[0] == '/') {
    const std::string here = directory_of(info.dli_fname);
    for (const char* relative :
         {"/plexusd", "/../sbin/plexusd", "/../bin/plexusd", "/../../sbin/plexusd",
          "/../../bin/plexusd", "/../daemon/plexusd", "/../../daemon/plexusd"}) {
      const std::string candidate = here + relative;
      tried->push_back(candidate);
      if (executable(candidate)) return candidate;
    }
  }
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    std::string dirs(path);
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t end = dirs.find(':', start);
      const std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
      if (!dir.empty()) {
        const std::string candidate = dir + "/plexusd";
        if (executable(candidate)) return candidate;
      }
      if (end == std::string::npos) break;
      start = end + 1;
    }
    tried->push_back("plexusd on PATH");
  }
  return "";
}

// mkdir -p for the socket's directory, private to this user where it is made.
void make_directories(const std::string& dir) {
  if (dir.empty() || dir == "/" || dir == ".") return;
  if (::access(dir.c_str(), F_OK) == 0) return;
  make_directories(directory_of(dir));
  ::mkdir(dir.c_str(), 0700);
}

std::string last_line(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Starts `binary` detached (its own session, reparented away from this process, stdin from
// /dev/null, stdout and stderr to `log`, no other descriptor of ours): this process may be
// a rank that exits long before the daemon. Returns its pid, or why not.
common::Result<pid_t> spawn(const std::string& binary, const std::vector<std::string>& args,
                            const std::string& log) {
  // Everything the children touch is made here: between fork and exec only async-signal-
  // safe calls (this process may have many threads).
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // The daemon serves every rank of the node, not the one that happened to start it: none
  // of that rank's GPU selection, and (below) all CPUs and "/" as its directory.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) == 0) continue;
    envp.push_back(*e);
  }
  envp.push_back(nullptr);
  cpu_set_t all_cpus;
  CPU_ZERO(&all_cpus);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &all_cpus);
  // Descriptors at 3 or above, so that dup2 onto 0, 1 and 2 cannot clobber one with another
  // (this process may have closed its stdin). O_NOFOLLOW: the log is ours, not a link.
  common::UniqueFd log_fd(
      ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600));
  common::UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (log_fd.get() >= 0 && log_fd.get() < 3)
    log_fd.reset(::fcntl(log_fd.get(), F_DUPFD_CLOEXEC, 3));
  if (null_fd.get() >= 0 && null_fd.get() < 3) {
    null_fd.reset(::fcntl(null_fd.get(), F_DUPFD_CLOEXEC, 3));
  }
  int pid_pipe[2];
  if (log_fd.get() < 0 || null_fd.get() < 0 || ::pipe2(pid_pipe, O_CLOEXEC) != 0) {
    return common::fail("cannot open " + log + ": " + std::strerror(errno));
  }
  const pid_t child = ::fork();
  if (child < 0) {
    std::string why = std::string("fork: ") + std::strerror(errno);
    ::close(pid_pipe[0]);
    ::close(pid_pipe[1]);
    return common::fail(std::move(why));
  }
  if (child == 0) {
    ::setsid();
    const pid_t daemon = ::fork();
    if (daemon == 0) {
      ::dup2(null_fd.get(), 0);
      ::dup2(log_fd.get(), 1);
      ::dup2(log_fd.get(), 2);
      if (::close_range(3, ~0U, 0) != 0) {  // before Linux 5.9
        for (int fd = 3; fd < 65536; ++fd) ::close(fd);
      }
      [[maybe_unused]] int ignored = ::chdir("/");
      ::sched_setaffinity(0, sizeof(all_cpus), &all_cpus);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(binary.c_str(), argv.data(), envp.data());
      _exit(127);
    }
    [[maybe_unused]] ssize_t n = ::write(pid_pipe[1], &daemon, sizeof(daemon));
    _exit(daemon > 0 ? 0 : 1);
  }
  ::close(pid_pipe[1]);
  pid_t daemon = -1;
  if (::read(pid_pipe[0], &daemon, sizeof(daemon)) != static_cast<ssize_t>(sizeof(daemon))) {
    daemon = -1;
  }
  ::close(pid_pipe[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (daemon <= 0) return common::fail("fork of the daemon failed");
  return daemon;
}

// The start lock (flock on "<socket>.lock", `path`), held until the descriptor returned is
// closed; or why it could not be taken.
common::Result<common::UniqueFd> take_start_lock(const std::string& path) {
  common::UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) return common::fail("cannot open " + path + ": " + std::strerror(errno));
  const auto deadline = Clock::now() + kLockWait;
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR)
      return common::fail("flock " + path + ": " + std::strerror(errno));
    if (Clock::now() > deadline) {
      return common::fail("another process has held " + path + " for 30 s while starting plexusd");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return fd;
}

std::unique_ptr<ControlChannel> try_connect(const std::string& socket_path) {
  try {
    return std::make_unique<ControlChannel>(socket_path, 0);
  } catch (const DaemonUnavailable&) {
    return nullptr;
  }
}

// Under the start lock: another rank may have started it meanwhile; else start it and wait
// until it listens.
std::unique_ptr<ControlChannel> start_and_connect(const std::string& relative_path) {
  // The daemon runs from "/": a relative socket path must name the same place there.
  std::string socket_path = relative_path;
  if (!socket_path.empty() && socket_path[0] != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof(cwd)) != nullptr) socket_path = std::string(cwd) + "/" + socket_path;
  }
  const std::string dir = directory_of(socket_path);
  make_directories(dir);
  // The lock, log and socket go in this directory: it must be this user's (or root's, for
  // /run/plexus) and not writable by others, or someone else could plant them.
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
      (st.st_uid != ::geteuid() && st.st_uid != 0) || (st.st_mode & 0022) != 0) {
    throw DaemonUnavailable("no plexusd answers on " + socket_path + ", and none is started: " +
                            dir + " is not a directory of this user's that only it can write");
  }
  const common::Result<common::UniqueFd> lock = take_start_lock(socket_path + ".lock");
  if (!lock) {
    throw DaemonUnavailable("no plexusd answers on " + socket_path +
                            ", and starting one failed: " + lock.error());
  }
  if (auto channel = try_connect(socket_path)) return channel;
  std::vector<std::string> tried;
  const std::string binary = find_plexusd(&tried);
  if (binary.empty()) {
    std::string list;
    for (const std::string& t : tried) list += (list.empty() ? "" : ", ") + t;
    throw DaemonUnavailable("no plexusd answers on " + socket_path +
                            " and none was found to start (tried " + list +
                            "); set PLEXUSD to its path, start the service, or point "
                            "PLEXUS_SOCKET at a running one");
  }
  const std::string log = dir + "/plexusd.log";
  const unsigned idle = idle_exit_s();
  const common::Result<pid_t> spawned = spawn(
      binary, {"--socket", socket_path, "--idle-exit-s", std::to_string(idle), "--metrics", "off"},
      log);
  if (!spawned) {
    throw DaemonUnavailable("no plexusd answers on " + socket_path + ", and starting " + binary +
                            " failed: " + spawned.error());
  }
  const pid_t pid = *spawned;
  std::fprintf(stderr,
               "libplexus: no plexusd answered on %s; started %s (pid %d) for this user, which "
               "exits after %u s with no client (PLEXUS_AUTOSTART_IDLE_S); its log: %s\n",
               socket_path.c_str(), binary.c_str(), static_cast<int>(pid), idle, log.c_str());
  const auto deadline = Clock::now() + kReadyWait;
  while (Clock::now() < deadline) {
    if (auto channel = try_connect(socket_path)) return channel;
    if (::kill(pid, 0) != 0 && errno == ESRCH) break;  // it exited
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw DaemonUnavailable("no plexusd answers on " + socket_path + ": the one started (" + binary +
                          ", pid " + std::to_string(pid) + ") did not come up; its log (" + log +
                          ") ends: " + last_line(log));
}

}  // namespace

std::unique_ptr<ControlChannel> connect_or_start(const std::string& socket_path, int retry_ms) {
  if (!autostart_enabled()) return std::make_unique<ControlChannel>(socket_path, retry_ms);
  if (auto channel = try_connect(socket_path)) return channel;
  // A socket that refuses may be a daemon restarting (systemd): give it the usual retry
  // before starting another. No socket at all: no daemon, start one now.
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    try {
      return std::make_unique<ControlChannel>(socket_path, retry_ms);
    } catch (const DaemonUnavailable&) {
    }
  }
  return start_and_connect(socket_path);
}

}  // namespace plexus::client
