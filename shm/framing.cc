#include "shm/framing.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace plexus::shm {

std::string send_frame(int sock, std::span<const std::byte> frame, std::span<const int> fds) {
  if (fds.size() > kMaxFdsPerFrame) return "too many descriptors for one frame";
  size_t sent = 0;
  bool fds_sent = fds.empty();
  while (sent < frame.size()) {
    iovec iov{const_cast<std::byte*>(frame.data() + sent), frame.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)] = {};
    if (!fds_sent) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::string("sendmsg failed: ") + std::strerror(errno);
    }
    fds_sent = true;
    sent += static_cast<size_t>(n);
  }
  return {};
}

ssize_t recv_with_fds(int sock, std::byte* buf, size_t cap, std::vector<common::UniqueFd>* fds,
                      bool* truncated) {
  iovec iov{buf, cap};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerFrame)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  *truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds->emplace_back(fd);
    }
  }
  return n;
}

std::string default_socket_path() {
  if (const char* env = std::getenv("PLEXUS_SOCKET"); env != nullptr && env[0] != '\0') return env;
  if (::geteuid() == 0) return "/run/plexus/plexusd.sock";
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] != '\0') {
    return std::string(xdg) + "/plexus/plexusd.sock";
  }
  return "/tmp/plexus-" + std::to_string(::geteuid()) + "/plexusd.sock";
}

}  // namespace plexus::shm
