#include "daemon/engine/engine.h"

#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <spdlog/spdlog.h>

#include "daemon/engine/job_admission.h"

namespace plexus::daemon {

Engine::Engine(const EngineConfig& config, SessionCloser close_session, LinkEvents link_events,
               std::shared_ptr<monitor::EventLog> events)
    : config_(config),
      events_(events ? std::move(events) : std::make_shared<monitor::EventLog>(config.node_name)),
      watch_(OpWatch::Settings{config.node_name, config.telemetry, config.stall, config.rank_skew},
             events_),
      gpu_(GpuStaging::Settings{config.max_gpu_staging_bytes, config.gpu_reduce_kernel_bytes},
           GpuStaging::Hooks{
               .complete =
                   [this](Session* session, uint64_t user_data, plexus_result_t status,
                          const std::string& message) {
                     complete(session, user_data, status, message);
                   },
               .finish_op =
                   [this](Session* session, uint64_t user_data, plexus_result_t status,
                          const std::string& message) {
                     completions_.finish(session, user_data, status, message);
                   },
               .shared_session =
                   [this](const Session* session) { return sessions_.shared(session); },
               .fail_comm =
                   [this](Comm& comm, plexus_result_t status, const std::string& reason) {
                     matcher_.fail(comm, status, reason, nullptr);
                   },
               .defer_failure =
                   [this](Comm& comm, const std::string& reason) {
                     internode_.defer_failure(comm, reason);
                   },
               .dispatch = [this](Comm& comm,
                                  Contribution part) { matcher_.dispatch(comm, std::move(part)); },
               .network_done =
                   [this](const std::shared_ptr<Comm>& comm) { internode_.note_progress(comm); }},
           watch_),
      close_session_(std::move(close_session)),
      pool_(config.workers),
      executor_(pool_, config.parallel_threshold_bytes),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      matcher_(
          [this](Session* session, uint64_t user_data, plexus_result_t status,
                 const std::string& message) { complete(session, user_data, status, message); },
          watch_, gpu_, executor_, internode_),
      intake_(watch_, completions_, matcher_, gpu_,
              EntryIntake::Hooks{.kill_session =
                                     [this](Session& session, const std::string& reason) {
                                       kill_session(session, reason);
                                     }}),
      internode_(config,
                 InternodeRunner::Hooks{
                     .complete =
                         [this](Session* session, uint64_t user_data, plexus_result_t status,
                                const std::string& message) {
                           complete(session, user_data, status, message);
                         },
                     .fail_comm =
                         [this](Comm& comm, plexus_result_t status, const std::string& reason) {
                           matcher_.fail(comm, status, reason, nullptr);
                         },
                     .run_ready = [this](Comm& comm) { matcher_.run_ready(comm); },
                     .shared_session =
                         [this](const Session* session) { return sessions_.shared(session); },
                     .deliver_p2p =
                         [this](Comm& comm, int destination, P2pMessage message) {
                           matcher_.deliver_remote(comm, destination, std::move(message));
                         },
                     .p2p_source_gone = [this](Comm& comm) { matcher_.fail_orphaned_recvs(comm); }},
                 std::move(link_events), watch_, gpu_, *events_) {
  if (!epoll_fd_) {
    throw std::system_error(errno, std::generic_category(), "engine epoll");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = commands_.fd();
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, commands_.fd(), &ev) != 0) {
    throw std::system_error(errno, std::generic_category(), "engine epoll: its command eventfd");
  }
  // Peer links have their own epoll set; it is readable when any link has I/O ready.
  ev.data.fd = internode_.links().epoll_fd();
  if (::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, internode_.links().epoll_fd(), &ev) != 0) {
    throw std::system_error(errno, std::generic_category(), "engine epoll: the peer links");
  }
  batch_.resize(EntryIntake::kBatchEntries);
  urgent_batch_.resize(EntryIntake::kBatchEntries);
  executor_.set_between_slices([this] { serve_latency_between_slices(); }, config.local_slice_bytes,
                               [this] {
                                 // Sorted: a latency session, if any, is first.
                                 const SessionTable::List& order = sessions_.by_class();
                                 return between_slices_serves_ && !order.empty() &&
                                        SessionTable::is_latency(*order.front());
                               });
}

Engine::~Engine() { stop(); }

void Engine::start() {
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  commands_.wake();
  thread_.join();
}

void Engine::reconfigure(const EngineConfig& next) {
  jobs().reconfigure(next.jobs);
  watch_.set_thresholds(next.stall, next.rank_skew);
  executor_.set_thresholds(next.parallel_threshold_bytes, next.local_slice_bytes);
}

void Engine::post(std::function<void(Engine&)> fn) { commands_.post(std::move(fn)); }

void Engine::loop() {
  shm::IdleStrategy idle(config_.idle.phases);
  while (!stopping_.load(std::memory_order_relaxed)) {
    bool progress = false;
    if (commands_.pending()) {
      commands_.run(*this);
      progress = true;
    }
    const SessionTable::List& order = sessions_.by_class(internode_.jobs().version());
    for (size_t i = 0; i < order.size(); ++i) {
      // Held: a command run from within (EntryIntake::handle) may remove this very session.
      const std::shared_ptr<Session> holder = order[i];
      Session& session = *holder;
      if (session.removed) continue;
      // Copies this session's ops start go on the GPUs' latency streams if its job is
      // latency-class.
      gpu_.prefer_urgent_copies(SessionTable::is_latency(session));
      // An op of this session's that a cut op runs under may serve the latency sessions
      // between its slices (serve_latency_between_slices).
      between_slices_serves_ = true;
      bool gpu_moved = false;
      if (!session.staging.empty() || !session.copying_back.empty()) {
        gpu_moved |= gpu_.advance(session);
      }
      if (!session.held_for_stream.empty()) gpu_moved |= intake_.release_held(session);
      if (gpu_moved) {
        gpu_.note_new_work();
        progress = true;
      }
      progress |= intake_.poll(session, batch_);
      between_slices_serves_ = false;
    }
    gpu_.prefer_urgent_copies(false);
    if (gpu_.advance()) progress = true;
    if (internode_.poll()) progress = true;
    completions_.publish();
    watch_.maybe_look(!progress);
    watchdog_.turn(!progress);
    if (progress) {
      idle.reset();
    } else if (idle.idle()) {
      park();
    }
  }
}

void Engine::set_watchdog(std::function<void()> ping, std::chrono::microseconds every) {
  watchdog_.set(std::move(ping), every);
  const auto every_ms = static_cast<uint32_t>(
      std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(every).count()));
  config_.idle.park_timeout_ms = std::min(config_.idle.park_timeout_ms, every_ms);
}

void Engine::serve_latency_between_slices() {
  // Only under the loop's own work on one session (its GPU input moving on, entries its
  // stream reached, its new entries), each taken off its queue before it is dispatched:
  // the ops taken here then touch nothing the cut op's callers are walking (the cut op's
  // communicator has no latency rank, or it would not be cut), and what they start runs
  // whole. Traffic classes change only in run_commands, never in here.
  if (!between_slices_serves_) return;
  between_slices_serves_ = false;
  const bool urgent_before = gpu_.urgent_copies();
  const SessionTable::List& order = sessions_.by_class();
  for (size_t i = 0; i < order.size(); ++i) {
    const std::shared_ptr<Session> holder = order[i];
    Session& session = *holder;
    if (!SessionTable::is_latency(session)) break;  // sorted: the latency class first
    // A session with entries held for GPU input or a stream keeps its order: the loop
    // takes those up.
    if (session.removed || !session.staging.empty() || !session.held_for_stream.empty()) continue;
    gpu_.prefer_urgent_copies(true);
    intake_.poll(session, urgent_batch_);
  }
  gpu_.prefer_urgent_copies(urgent_before);
  completions_.publish();
  between_slices_serves_ = true;
}

void Engine::park() {
  const SessionTable::List& sessions = sessions_.all();
  for (size_t i = 0; i < sessions.size(); ++i) {
    Session& session = *sessions[i];
    // A session whose completion queue is full has no work for us, however many
    // submissions wait: its client wakes us when it frees slots. Otherwise a client that
    // stops reading completions would keep the engine spinning.
    if (session.inflight >= session.ring_end->completion_space()) {
      session.ring_end->announce_park();
      continue;
    }
    if (session.ring_end->prepare_park()) {
      for (size_t j = 0; j < i; ++j) sessions[j]->ring_end->finish_park();
      return;
    }
  }
  if (!commands_.pending() && !stopping_.load()) {
    epoll_event events[16];
    int timeout = static_cast<int>(config_.idle.park_timeout_ms);
    // Peer links need a tick every few milliseconds (heartbeats, silent paths).
    if (const int tick = internode_.links().max_sleep_ms(); tick >= 0) {
      timeout = std::min(timeout, tick);
    }
    // A GPU stream sets its ready flag, and a copy engine ends a copy, with no doorbell:
    // look again soon while either is awaited.
    timespec park_for{timeout / 1000, static_cast<long>(timeout % 1000) * 1000000L};
    if (const auto look = gpu_.look_again_in(sessions_.wait_on_gpu())) {
      park_for = {0, static_cast<long>(look->count())};
    }
    // Frames waiting for a path's kernel queue to drain: no event says when it has.
    if (const auto look = internode_.links().look_again_in()) {
      if (park_for.tv_sec > 0 || park_for.tv_nsec > look->count()) {
        park_for = {0, static_cast<long>(look->count())};
      }
    }
    int n = ::epoll_pwait2(epoll_fd_.get(), events, 16, &park_for, nullptr);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd != internode_.links().epoll_fd()) shm::drain_eventfd(events[i].data.fd);
    }
  }
  for (const auto& s : sessions) s->ring_end->finish_park();
}

void Engine::add_session(std::shared_ptr<Session> session) {
  session->ring_end.emplace(*session->rings());
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = session->submission_eventfd();
  const bool watched =
      ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, session->submission_eventfd(), &ev) == 0;
  const int watch_errno = errno;
  internode_.jobs().job_seen(session->job_counters());
  Session& added = sessions_.add(std::move(session));
  // A session the engine would not hear submit is closed, not left to hang its ranks.
  if (!watched) {
    kill_session(added, std::string("the engine cannot watch its submissions: ") +
                            std::strerror(watch_errno));
  }
}

void Engine::remove_session(uint64_t session_id, const std::string& reason) {
  std::shared_ptr<Session> session = sessions_.shared(session_id);
  if (!session) return;
  session->removed = true;
  for (auto& [handle, membership] : session->comms) {
    Comm& comm = *membership.comm;
    const int rank = membership.rank;
    matcher_.fail(comm, PLEXUS_ERR_PEER_LOST,
                  "rank " + std::to_string(rank) + " (" + session->describe() +
                      ") of communicator " + token_prefix(comm.token()) + " was lost: " + reason,
                  nullptr);
    matcher_.member_gone(comm, rank);
  }
  session->comms.clear();
  // Its GPU allocations are unmapped now; ops still in flight hold their own mappings.
  // Its staging goes here too, on the engine thread that owns the pinned-buffer cache
  // (a copy still running is waited for: its buffers are freed after it).
  session->gpu_regions.clear();
  session->staging.clear();
  session->copying_back.clear();
  session->staged_ops.clear();
  discharge_session(*session);  // what its ops held against its job's cap
  // A failure here changes nothing: the eventfd closes with the session.
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, session->submission_eventfd(), nullptr);
  completions_.forget(session.get());
  sessions_.erase(session.get());
}

common::Result<uint32_t> Engine::register_gpu_memory(uint64_t session_id,
                                                     std::shared_ptr<gpu::DeviceMemory> device,
                                                     std::shared_ptr<gpu::DeviceMapping> mapping) {
  Session* session = sessions_.find(session_id);
  if (session == nullptr) return common::fail("the session ended");
  return gpu_.register_memory(*session, std::move(device), std::move(mapping));
}

bool Engine::release_gpu_memory(uint64_t session_id, uint32_t region) {
  Session* session = sessions_.find(session_id);
  return session != nullptr && session->gpu_regions.release(region);
}

std::shared_ptr<gpu::DeviceMapping> Engine::gpu_mapping(uint64_t session_id,
                                                        uint32_t region) const {
  const Session* session = sessions_.find(session_id);
  return session != nullptr ? session->gpu_regions.mapping(region) : nullptr;
}

void Engine::kill_session(Session& session, const std::string& reason) {
  spdlog::warn("session {} ({}): {}; closing it", session.id(), session.describe(), reason);
  const uint64_t id = session.id();
  remove_session(id, reason);
  close_session_(id, reason);
}

void Engine::complete(Session* session, uint64_t user_data, plexus_result_t status,
                      const std::string& message) {
  if (session == nullptr || session->removed) return;
  if (!session->staged_ops.empty()) {
    if (auto it = session->staged_ops.find(user_data); it != session->staged_ops.end()) {
      std::shared_ptr<gpu::StagedOp> op = std::move(it->second);
      session->staged_ops.erase(it);
      if (status == PLEXUS_SUCCESS && op->has_device_result()) {
        // The completion (and the stream's done flag) waits until the result is there.
        gpu_.start_copy_back(*session, user_data, std::move(op));
        return;
      }
    }
  }
  completions_.finish(session, user_data, status, message);
}

}  // namespace plexus::daemon
