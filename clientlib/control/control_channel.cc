#include "clientlib/control/control_channel.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <capnp/serialize.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "shm/unix_socket.h"

namespace plexus::client {

ControlChannel::ControlChannel(const std::string& socket_path, int retry_ms)
    : socket_path_(socket_path) {
  sockaddr_un addr{};
  try {
    addr = shm::unix_socket_address(socket_path);
  } catch (const std::invalid_argument& e) {
    throw DaemonUnavailable(e.what());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(retry_ms);
  while (true) {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) return;
    const int err = errno;
    const bool retryable = err == ENOENT || err == ECONNREFUSED || err == EAGAIN;
    if (!retryable || std::chrono::steady_clock::now() >= deadline) {
      throw DaemonUnavailable("no plexusd answers on " + socket_path +
                              " (connect: " + std::strerror(err) +
                              "); start plexusd, or point PLEXUS_SOCKET at its socket");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void ControlChannel::read_one_frame(std::unique_lock<std::mutex>& lock) {
  reader_active_ = true;
  lock.unlock();
  std::string error;
  std::optional<kj::Array<capnp::word>> words;
  while (error.empty()) {
    auto next = decoder_.next();
    if (!next.ok()) {
      error = next.error();
      break;
    }
    words = next.take();
    if (words) break;
    std::byte buffer[64 * 1024];
    bool truncated = false;
    ssize_t n = shm::recv_with_fds(fd_.get(), buffer, sizeof(buffer), &pending_fds_, &truncated);
    if (n == 0) {
      error = "plexusd closed the connection (it exited or restarted)";
    } else if (n < 0) {
      error = std::string("reading from plexusd failed: ") + std::strerror(errno);
    } else {
      decoder_.append(buffer, static_cast<size_t>(n));
    }
  }
  lock.lock();
  reader_active_ = false;
  if (!error.empty()) {
    dead_reason_ = error;
  } else {
    capnp::FlatArrayMessageReader reader(*words, common::untrusted_reader_options());
    uint32_t id = reader.getRoot<shm::control::DaemonMessage>().getRequestId();
    Reply reply{std::move(*words), std::move(pending_fds_)};
    pending_fds_.clear();
    replies_[id] = std::move(reply);
  }
  replies_cv_.notify_all();
}

Reply ControlChannel::call(capnp::MallocMessageBuilder& message, std::span<const int> fds) {
  uint32_t id;
  {
    std::lock_guard lock(mutex_);
    if (!dead_reason_.empty()) throw DaemonLost(dead_reason_);
    id = next_request_id_++;
  }
  message.getRoot<shm::control::ClientMessage>().setRequestId(id);
  std::vector<std::byte> frame = common::encode_frame(message);
  {
    std::lock_guard lock(send_mutex_);
    std::string error = shm::send_frame(fd_.get(), frame, fds);
    if (!error.empty()) throw DaemonLost("sending to plexusd failed: " + error);
  }
  std::unique_lock lock(mutex_);
  while (true) {
    if (auto it = replies_.find(id); it != replies_.end()) {
      Reply reply = std::move(it->second);
      replies_.erase(it);
      return reply;
    }
    if (!dead_reason_.empty()) throw DaemonLost(dead_reason_);
    if (!reader_active_) {
      read_one_frame(lock);
    } else {
      replies_cv_.wait(lock);
    }
  }
}

}  // namespace plexus::client
