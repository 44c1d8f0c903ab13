#include "clientlib/src/client_context.h"
#include "clientlib/src/autostart.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <capnp/serialize.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>

namespace plexus::client {
namespace {

namespace control = shm::control;

ClientContext* g_context = nullptr;
std::mutex g_context_mutex;

// Pools of the processes this one was forked from (set in the child at fork): their blocks
// are this process's private copies, freed with it. A few generations at most.
struct InheritedPool {
  const std::byte* base;
  size_t size;
};
constexpr size_t kMaxInheritedPools = 8;
InheritedPool g_inherited[kMaxInheritedPools];
size_t g_inherited_count = 0;
constexpr uint64_t kDefaultPoolBytes = 1ull << 30;

uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || text[0] == '\0') return fallback;
  char* end = nullptr;
  uint64_t value = std::strtoull(text, &end, 10);
  switch (end != nullptr ? *end : '\0') {
    case 'k':
    case 'K':
      value <<= 10;
      break;
    case 'm':
    case 'M':
      value <<= 20;
      break;
    case 'g':
    case 'G':
      value <<= 30;
      break;
    default:
      break;
  }
  return value;
}

std::string process_name() {
  char name[64] = {};
  if (FILE* f = std::fopen("/proc/self/comm", "r")) {
    if (std::fgets(name, sizeof(name), f) == nullptr) name[0] = '\0';
    std::fclose(f);
  }
  std::string text(name);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

}  // namespace

void ClientContext::forget_parent_in_child() noexcept {
  // Only system calls and plain stores: this runs in the child of a fork that may have
  // happened while another thread held a lock.
  ClientContext* parent = g_context;
  if (parent != nullptr) {
    // The parent's pool stays mapped where it was (buffers and tensors the child inherited
    // point into it) but private, so that the child's writes to them reach neither the
    // parent nor the daemon; plexus_free of such a buffer is then a no-op.
    (void)parent->pool_->make_private_after_fork();
    if (g_inherited_count < kMaxInheritedPools) {
      g_inherited[g_inherited_count++] = {parent->pool_->base(), parent->pool_->size()};
    }
    // The parent's session must end with the parent: the daemon learns that a killed rank
    // is gone when its last descriptor of the session closes, not when a DataLoader worker
    // forked from it exits.
    ::close(parent->control_->fd());
    ::close(parent->submission_eventfd_.get());
    ::close(parent->completion_eventfd_.get());
  }
  g_context = nullptr;  // the parent's context is left as it is (its descriptors closed)
  new (&g_context_mutex) std::mutex();  // another thread may have held it at the fork
}

bool ClientContext::inherited_from_parent(const void* ptr) {
  const auto* p = static_cast<const std::byte*>(ptr);
  for (size_t i = 0; i < g_inherited_count; ++i) {
    if (p >= g_inherited[i].base && p < g_inherited[i].base + g_inherited[i].size) return true;
  }
  return false;
}

ClientContext& ClientContext::get() {
  std::lock_guard lock(g_context_mutex);
  if (g_context == nullptr) {
    static bool atfork_installed = false;
    if (!atfork_installed) {
      // A forked child must not share the parent's session: it gets its own on first use.
      pthread_atfork(nullptr, nullptr, [] { forget_parent_in_child(); });
      atfork_installed = true;
    }
    g_context = new ClientContext();  // lives for the process: mappings outlive all handles
  }
  return *g_context;
}

ClientContext::ClientContext() {
  idle_.spin_us = static_cast<uint32_t>(env_u64("PLEXUS_SPIN_US", idle_.spin_us));
  idle_.yield_us = static_cast<uint32_t>(env_u64("PLEXUS_YIELD_US", idle_.yield_us));
  park_at_once_bytes_ = env_u64("PLEXUS_PARK_BYTES", park_at_once_bytes_);
  control_ = connect_or_start(shm::default_socket_path(),
                              static_cast<int>(env_u64("PLEXUS_CONNECT_TIMEOUT_MS", 1000)));
  pool_ = std::make_unique<shm::ClientPool>(env_u64("PLEXUS_POOL_SIZE", kDefaultPoolBytes));
  stream_flags_ = std::make_unique<StreamFlagSlots>(*pool_);

  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<control::ClientMessage>().initHello();
  hello.setProtocolVersion(shm::kProtocolVersion);
  hello.setRole(control::Role::RANK);
  hello.setPoolBytes(pool_->size());
  hello.setProcessName(process_name());
  // Groups this process's ops with its job's in the daemon's reports and metrics.
  if (const char* job = std::getenv("PLEXUS_JOB"); job != nullptr) hello.setJobName(job);
  const int pool_fd = pool_->fd();
  Reply reply = control_->call(message, std::span<const int>(&pool_fd, 1));
  capnp::FlatArrayMessageReader reader(reply.words, common::untrusted_reader_options());
  auto root = reader.getRoot<control::DaemonMessage>();
  if (root.isError()) {
    throw std::runtime_error(std::string("plexusd refused this process: ") +
                             root.getError().getMessage().cStr());
  }
  if (!root.isHelloReply() || reply.fds.size() != 3) {
    throw std::runtime_error("plexusd answered the hello with an unexpected reply");
  }
  session_id_ = root.getHelloReply().getSessionId();
  rings_.emplace(shm::RingMemory::attach(std::move(reply.fds[0])));
  ring_end_.emplace(*rings_);
  submission_eventfd_ = std::move(reply.fds[1]);
  completion_eventfd_ = std::move(reply.fds[2]);
}

void ClientContext::submit(plexus_request* req, shm::SubmissionEntry entry) {
  const std::pair<plexus_request*, shm::SubmissionEntry> one{req, entry};
  submit_batch({&one, 1});
}

void ClientContext::submit_batch(
    std::span<const std::pair<plexus_request*, shm::SubmissionEntry>> batch) {
  {
    std::lock_guard lock(requests_mutex_);
    for (auto& [req, entry] : batch) {
      req->id = next_request_id_++;
      outstanding_[req->id] = req;
      if (req->comm) req->comm->outstanding.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (dead_.load()) {
    fail_all(dead_reason_);
    return;
  }
  size_t next = 0;
  while (next < batch.size()) {
    bool wake = false;
    {
      std::lock_guard lock(ring_mutex_);
      uint32_t space = ring_end_->submission_space();
      for (; space > 0 && next < batch.size(); --space, ++next) {
        shm::SubmissionEntry entry = batch[next].second;
        entry.user_data = batch[next].first->id;
        ring_end_->stage(entry);
      }
      wake = ring_end_->publish();
    }
    if (wake) shm::signal_eventfd(submission_eventfd_.get());
    if (next < batch.size()) {
      // The ring is full: the daemon frees slots as we take completions.
      progress();
      if (daemon_gone()) return;
      sched_yield();
    }
  }
}

void ClientContext::complete(uint64_t id, plexus_result_t status, std::string message,
                             int32_t source) {
  plexus_request* req = nullptr;
  {
    std::lock_guard lock(requests_mutex_);
    auto it = outstanding_.find(id);
    if (it == outstanding_.end()) return;  // not ours (or already failed locally)
    req = it->second;
    outstanding_.erase(it);
  }
  req->status = status;
  req->message = std::move(message);
  if (status == PLEXUS_SUCCESS && req->source_out != nullptr) *req->source_out = source;
  if (req->stream_slot >= 0) {
    // The daemon wrote `done` before completing; if it died first, the stream goes on now.
    stream_flags_->release(req->stream_slot, req->stream_ticket);
    req->stream_slot = -1;
  }
  if (req->detached) {
    if (status != PLEXUS_SUCCESS && req->comm) {
      std::lock_guard lock(req->comm->async_mutex);
      if (req->comm->async_status == PLEXUS_SUCCESS) {
        req->comm->async_status = status;
        req->comm->async_message = req->message;
      }
    }
    if (req->comm) req->comm->outstanding.fetch_sub(1, std::memory_order_release);
    delete req;
    return;
  }
  if (req->comm) req->comm->outstanding.fetch_sub(1, std::memory_order_release);
  req->done.store(true, std::memory_order_release);
}

bool ClientContext::progress() {
  std::unique_lock lock(ring_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another thread is taking completions for us
  bool any = false;
  shm::CompletionEntry entry;
  while (ring_end_->poll_completion(&entry)) {
    any = true;
    complete(entry.user_data, static_cast<plexus_result_t>(entry.status),
             std::string(entry.message, entry.message_len), entry.source);
  }
  // Freed completion slots may be what a parked daemon waits for.
  if (any && ring_end_->daemon_parked_with_backlog()) {
    shm::signal_eventfd(submission_eventfd_.get());
  }
  return any;
}

void ClientContext::fail_all(const std::string& reason) {
  std::vector<uint64_t> ids;
  {
    std::lock_guard lock(requests_mutex_);
    for (auto& [id, req] : outstanding_) ids.push_back(id);
  }
  for (uint64_t id : ids) complete(id, PLEXUS_ERR_DAEMON_LOST, reason);
}

bool ClientContext::daemon_gone() {
  if (dead_.load()) return true;
  pollfd pfd{control_->fd(), POLLRDHUP, 0};
  if (::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    {
      std::lock_guard lock(requests_mutex_);
      dead_reason_ = "plexusd on " + control_->socket_path() +
                     " went away (it exited or was killed) while requests were outstanding";
    }
    dead_.store(true);
    progress();  // take what it completed before it went
    fail_all(dead_reason_);
    return true;
  }
  return false;
}

template <typename Done>
void ClientContext::wait_until(Done&& done, shm::IdleSettings settings) {
  shm::IdleStrategy idle(settings);
  while (!done()) {
    if (progress()) {
      idle.reset();
      continue;
    }
    if (!idle.idle()) continue;
    if (daemon_gone()) return;
    // Park: announce it, re-check, then sleep on the completion eventfd (bounded, so a
    // vanished daemon is noticed).
    {
      std::lock_guard lock(ring_mutex_);
      if (ring_end_->prepare_park()) continue;
    }
    if (!done()) {
      pollfd fds[2] = {{completion_eventfd_.get(), POLLIN, 0}, {control_->fd(), POLLRDHUP, 0}};
      if (::poll(fds, 2, 100) > 0 && (fds[0].revents & POLLIN) != 0) {
        shm::drain_eventfd(completion_eventfd_.get());
      }
    }
    {
      std::lock_guard lock(ring_mutex_);
      ring_end_->finish_park();
    }
  }
}

void ClientContext::watch_daemon_for_streams() {
  std::call_once(stream_watch_started_, [this] {
    // Detached: the context lives as long as the process. poll costs nothing until the
    // socket hangs up; the bounded timeout only rechecks dead_.
    std::thread([this] {
      while (!dead_.load()) {
        pollfd pfd{control_->fd(), POLLRDHUP, 0};
        if (::poll(&pfd, 1, 1000) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) {
          daemon_gone();
          return;
        }
      }
    }).detach();
  });
}

void ClientContext::wait(plexus_request* req) {
  const shm::IdleSettings settings =
      req->bytes >= park_at_once_bytes_ ? shm::IdleSettings{0, 0} : idle_;
  wait_until([req] { return req->done.load(std::memory_order_acquire); }, settings);
}

bool ClientContext::quiesce(CommState& comm, std::chrono::milliseconds limit) {
  const auto start = std::chrono::steady_clock::now();
  auto idle = [&comm] { return comm.outstanding.load(std::memory_order_acquire) == 0; };
  // (A parked wait looks again at least every 100 ms: wait_until.)
  auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 start);
  };
  wait_until([&] { return idle() || elapsed() >= limit; }, idle_);
  return idle();
}

}  // namespace plexus::client
