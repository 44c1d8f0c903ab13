#include "daemon/engine/engine.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <spdlog/spdlog.h>

#include "shm/dtype.h"
#include "shm/stream_flags.h"

namespace plexus::daemon {
namespace {

constexpr uint32_t kBatchEntries = 64;

}  // namespace

Engine::Engine(const EngineConfig& config, SessionCloser close_session, LinkEvents link_events,
               std::shared_ptr<monitor::EventLog> events)
    : config_(config),
      events_(events ? std::move(events) : std::make_shared<monitor::EventLog>(config.node_name)),
      watch_(OpWatch::Settings{config.node_name, config.telemetry, config.stall, config.rank_skew},
             events_),
      gpu_(
          GpuStaging::Settings{config.max_gpu_staging_bytes, config.gpu_reduce_kernel_bytes},
          GpuStaging::Hooks{
              [this](Session* session, uint64_t user_data, plexus_result_t status,
                     const std::string& message) { complete(session, user_data, status, message); },
              [this](Session* session, uint64_t user_data, plexus_result_t status,
                     const std::string& message) {
                finish_op(session, user_data, status, message);
              },
              [this](const Session* session) { return shared_session(session); },
              [this](Comm& comm, plexus_result_t status, const std::string& reason) {
                fail_comm(comm, status, reason, nullptr);
              },
              [this](Comm& comm, const std::string& reason) { defer_failure(comm, reason); },
              [this](Comm& comm, Contribution part) { dispatch(comm, std::move(part)); },
              [this](const std::shared_ptr<Comm>& comm) { progress_.push_back(comm); }},
          watch_),
      close_session_(std::move(close_session)),
      pool_(config.workers),
      executor_(pool_, config.parallel_threshold_bytes),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      command_eventfd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      link_events_(std::move(link_events)),
      links_(NodeLinks::Handler{
                 [this](uint64_t peer, const transports::wire::DataFrameHeader& h,
                        std::span<const std::byte> payload) {
                   return on_peer_frame(peer, h, payload);
                 },
                 [this](uint64_t peer, const transports::wire::DataFrameHeader& h) {
                   return place_peer_frame(peer, h);
                 },
                 [this](uint64_t peer, const transports::wire::DataFrameHeader& h) {
                   return on_peer_frame_placed(peer, h);
                 },
                 [this](uint64_t peer, const std::string& name, const std::string& reason) {
                   on_peer_lost(peer, name, reason);
                 },
                 [this](uint64_t peer, const std::string& nic, const std::string& remote) {
                   if (link_events_.path_lost) link_events_.path_lost(peer, nic, remote);
                 },
                 [this](const std::string& nic) {
                   if (link_events_.nic_up) link_events_.nic_up(nic);
                 }},
             NodeLinks::kDefaultChunkBytes, config.channel) {
  if (!epoll_fd_ || !command_eventfd_) {
    throw std::system_error(errno, std::generic_category(), "engine epoll/eventfd");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = command_eventfd_.get();
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, command_eventfd_.get(), &ev);
  // Peer links have their own epoll set; it is readable when any link has I/O ready.
  ev.data.fd = links_.epoll_fd();
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, links_.epoll_fd(), &ev);
  batch_.resize(kBatchEntries);
  if (config.telemetry) links_.set_telemetry(config.telemetry_window, config.telemetry_windows);
  if (config.follow_nics) {
    const std::string error = links_.watch_nics();
    if (!error.empty()) {
      spdlog::warn(
          "cannot follow NIC state ({}): a path over a NIC that goes down fails only "
          "after --path-timeout-ms",
          error);
    }
  }
}

Engine::~Engine() { stop(); }

void Engine::start() {
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  if (!thread_.joinable()) return;
  stopping_.store(true);
  shm::signal_eventfd(command_eventfd_.get());
  thread_.join();
}

void Engine::post(std::function<void(Engine&)> fn) {
  {
    std::lock_guard lock(command_mutex_);
    commands_.push_back(std::move(fn));
  }
  has_commands_.store(true, std::memory_order_release);
  shm::signal_eventfd(command_eventfd_.get());
}

void Engine::run_commands() {
  std::vector<std::function<void(Engine&)>> commands;
  {
    std::lock_guard lock(command_mutex_);
    commands.swap(commands_);
    has_commands_.store(false, std::memory_order_relaxed);
  }
  for (auto& command : commands) command(*this);
}

void Engine::loop() {
  shm::IdleStrategy idle(config_.idle.phases);
  while (!stopping_.load(std::memory_order_relaxed)) {
    bool progress = false;
    if (has_commands_.load(std::memory_order_acquire)) {
      run_commands();
      progress = true;
    }
    for (size_t i = 0; i < sessions_.size(); ++i) {
      // Held: a command run from within (handle_entry) may remove this very session.
      const std::shared_ptr<Session> holder = sessions_[i];
      Session& session = *holder;
      bool gpu_moved = false;
      if (!session.staging.empty() || !session.copying_back.empty()) {
        gpu_moved |= gpu_.advance(session);
      }
      if (!session.held_for_stream.empty()) gpu_moved |= release_held_entries(session);
      if (gpu_moved) {
        gpu_.note_new_work();
        progress = true;
      }
      progress |= poll_session(session);
    }
    if (gpu_.advance()) progress = true;
    if (links_.active()) progress |= links_.poll(0);
    if (!progress_.empty()) {
      internode_progress();
      progress = true;
    }
    publish_completions();
    watch_.maybe_look(!progress);
    if (progress) {
      idle.reset();
    } else if (idle.idle()) {
      park();
    }
  }
}

void Engine::park() {
  for (size_t i = 0; i < sessions_.size(); ++i) {
    Session& session = *sessions_[i];
    // A session whose completion queue is full has no work for us, however many
    // submissions wait: its client wakes us when it frees slots. Otherwise a client that
    // stops reading completions would keep the engine spinning.
    if (session.inflight >= session.ring_end->completion_space()) {
      session.ring_end->announce_park();
      continue;
    }
    if (session.ring_end->prepare_park()) {
      for (size_t j = 0; j < i; ++j) sessions_[j]->ring_end->finish_park();
      return;
    }
  }
  if (!has_commands_.load(std::memory_order_acquire) && !stopping_.load()) {
    epoll_event events[16];
    int timeout = static_cast<int>(config_.idle.park_timeout_ms);
    // Peer links need a tick every few milliseconds (heartbeats, silent paths).
    if (links_.max_sleep_ms() >= 0) timeout = std::min(timeout, links_.max_sleep_ms());
    // A GPU stream sets its ready flag, and a copy engine ends a copy, with no doorbell:
    // look again soon while either is awaited.
    timespec park_for{timeout / 1000, static_cast<long>(timeout % 1000) * 1000000L};
    if (const auto look = gpu_.look_again_in(sessions_wait_on_gpu())) {
      park_for = {0, static_cast<long>(look->count())};
    }
    int n = ::epoll_pwait2(epoll_fd_.get(), events, 16, &park_for, nullptr);
    for (int i = 0; i < n; ++i) {
      if (events[i].data.fd != links_.epoll_fd()) shm::drain_eventfd(events[i].data.fd);
    }
  }
  for (auto& s : sessions_) s->ring_end->finish_park();
}

std::shared_ptr<Session> Engine::shared_session(const Session* session) const {
  for (const auto& s : sessions_) {
    if (s.get() == session) return s;
  }
  return nullptr;
}

Session* Engine::find_session(uint64_t id) {
  for (auto& s : sessions_) {
    if (s->id() == id) return s.get();
  }
  return nullptr;
}

void Engine::add_session(std::shared_ptr<Session> session) {
  session->ring_end.emplace(*session->rings);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = session->submission_eventfd.get();
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, session->submission_eventfd.get(), &ev);
  sessions_.push_back(std::move(session));
}

void Engine::remove_session(uint64_t session_id, const std::string& reason) {
  auto it = std::find_if(sessions_.begin(), sessions_.end(),
                         [&](const auto& s) { return s->id() == session_id; });
  if (it == sessions_.end()) return;
  std::shared_ptr<Session> session = *it;
  session->removed = true;
  for (auto& [handle, membership] : session->comms) {
    Comm& comm = *membership.comm;
    const int rank = membership.rank;
    fail_comm(comm, PLEXUS_ERR_PEER_LOST,
              "rank " + std::to_string(rank) + " (" + session->describe() + ") of communicator " +
                  token_prefix(comm.token()) + " was lost: " + reason,
              nullptr);
    member_gone(comm, rank);
  }
  session->comms.clear();
  // Its GPU allocations are unmapped now; ops still in flight hold their own mappings.
  // Its staging goes here too, on the engine thread that owns the pinned-buffer cache
  // (a copy still running is waited for: its buffers are freed after it).
  session->gpu_regions.clear();
  session->staging.clear();
  session->copying_back.clear();
  session->staged_ops.clear();
  ::epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, session->submission_eventfd.get(), nullptr);
  std::erase(to_publish_, session.get());
  sessions_.erase(it);
}

uint32_t Engine::register_gpu_memory(uint64_t session_id, std::shared_ptr<gpu::DeviceMemory> device,
                                     std::shared_ptr<gpu::DeviceMapping> mapping,
                                     std::string* error) {
  Session* session = find_session(session_id);
  if (session == nullptr) {
    *error = "the session ended";
    return 0;
  }
  return gpu_.register_memory(*session, std::move(device), std::move(mapping), error);
}

bool Engine::release_gpu_memory(uint64_t session_id, uint32_t region) {
  Session* session = find_session(session_id);
  return session != nullptr && session->gpu_regions.release(region);
}

void Engine::add_comm(const std::shared_ptr<Comm>& comm) {
  const int n = comm->nranks();
  comm->next_seq.assign(static_cast<size_t>(n), 0);
  watch_.watch(comm);
  comm->members_present = comm->local_ranks();
  if (comm->span()) register_multi_node(comm);
  for (int rank = 0; rank < n; ++rank) {
    auto& member = comm->mutable_members()[static_cast<size_t>(rank)];
    if (member.remote) continue;
    Session* session = find_session(member.session_id);
    member.session = session;
    if (session == nullptr) {
      // It left between joining and now: the communicator cannot run.
      fail_comm(*comm, PLEXUS_ERR_PEER_LOST,
                "rank " + std::to_string(rank) + " (pid " + std::to_string(member.pid) +
                    ") disconnected while communicator " + token_prefix(comm->token()) +
                    " was being created",
                nullptr);
      member_gone(*comm, rank);
      continue;
    }
    session->comms[member.handle] = CommMembership{comm, rank};
    if (!comm->job_counters) {
      comm->job = session->job;
      comm->job_counters = session->job_counters;
    }
  }
}

void Engine::leave_comm(uint64_t session_id, uint32_t handle, bool abort) {
  Session* session = find_session(session_id);
  if (session == nullptr) return;
  auto it = session->comms.find(handle);
  if (it == session->comms.end()) return;
  std::shared_ptr<Comm> comm = it->second.comm;
  const int rank = it->second.rank;
  session->comms.erase(it);
  session->comm_count.fetch_sub(1, std::memory_order_relaxed);
  const std::string who = "rank " + std::to_string(rank) + " (" + session->describe() + ")";
  const std::string reason =
      abort ? who + " aborted communicator " + token_prefix(comm->token())
            : who + " left communicator " + token_prefix(comm->token()) + " (destroyed it)";
  if (abort) {
    fail_comm(*comm, PLEXUS_ERR_PEER_LOST, reason, session);
  } else if (comm->internode && comm->internode->active) {
    // The other nodes are inside a collective that needs this node's part.
    fail_comm(*comm, PLEXUS_ERR_PEER_LOST, reason + " while a collective was in flight", nullptr);
  } else {
    rank_departed(*comm, rank, reason);
    if (comm->span() && !comm->broken()) {
      for (size_t node = 0; node < comm->span()->node_ids.size(); ++node) {
        if (static_cast<int>(node) == comm->span()->topology.my_node) continue;
        links_.send_departed(comm->span()->node_ids[node], comm->span()->comm_id, rank,
                             comm->next_seq[static_cast<size_t>(rank)], reason);
      }
    }
  }
  member_gone(*comm, rank);
}

void Engine::rank_departed(Comm& comm, int rank, const std::string& reason) {
  comm.mutable_members()[static_cast<size_t>(rank)].departure = reason;
  if (comm.first_departure.empty()) comm.first_departure = reason;
  if (comm.broken()) return;  // everything pending has already failed
  auto fail_part = [&](const Contribution& part) {
    complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, reason);
  };
  // Every collective needs every rank: the pending ones can never finish.
  for (auto& op : comm.collectives) {
    for (auto& part : op.parts) fail_part(part);
  }
  comm.collectives.clear();
  const auto n = static_cast<size_t>(comm.nranks());
  const auto gone = static_cast<size_t>(rank);
  for (size_t key = 0; key < comm.sends.size(); ++key) {
    if (key / n != gone && key % n != gone) continue;
    for (auto& part : comm.sends[key]) fail_part(part);
    for (auto& part : comm.recvs[key]) fail_part(part);
    comm.sends[key].clear();
    comm.recvs[key].clear();
  }
}

const std::string* Engine::departure_of(const Comm& comm, int rank) {
  const auto& member = comm.members()[static_cast<size_t>(rank)];
  return member.present ? nullptr : &member.departure;
}

void Engine::member_gone(Comm& comm, int rank) {
  auto& member = comm.mutable_members()[static_cast<size_t>(rank)];
  if (!member.present) return;
  member.present = false;
  if (member.departure.empty()) {
    member.departure = "rank " + std::to_string(rank) + " is no longer a member of communicator " +
                       token_prefix(comm.token());
  }
  if (comm.first_departure.empty()) comm.first_departure = member.departure;
  member.session = nullptr;
  if (--comm.members_present == 0) {
    if (comm.span()) retire_multi_node(comm);
    comm.finished.store(true, std::memory_order_release);
  }
}

void Engine::fail_comm(Comm& comm, plexus_result_t status, const std::string& reason,
                       const Session* aborting_session) {
  const bool first = !comm.broken();
  if (first && watch_.timing() && !comm.collectives.empty() &&
      comm.collectives.front().arrived > 0) {
    watch_.record_finished(comm, comm.collectives.front(), comm.first_seq,
                           comm.internode ? comm.internode->active_algorithm : "local", status);
  }
  comm.mark_broken(status, reason);
  if (comm.internode) {
    // The op's network part stops here; the scratch stays alive for queued sends. Its
    // clients are told now and may reuse their buffers at once, so frames still being
    // read into a rank's buffer must finish elsewhere.
    fail_remote_p2p(comm);
    stop_active_internode_op(comm);
    comm.internode->early.clear();
    comm.internode->early_bytes = 0;
    if (first) tell_peers_failed(comm, reason);
  }
  auto fail_part = [&](const Contribution& part) {
    if (part.session == nullptr) return;
    if (part.session == aborting_session) {
      complete(part.session, part.entry.user_data, PLEXUS_ERR_COMM_ABORTED,
               "communicator " + token_prefix(comm.token()) + " was aborted by this rank");
    } else {
      complete(part.session, part.entry.user_data, comm.broken_status(), comm.broken_reason());
    }
  };
  for (auto& op : comm.collectives) {
    for (auto& part : op.parts) fail_part(part);
  }
  comm.collectives.clear();
  for (auto& queue : comm.sends) {
    for (auto& part : queue) fail_part(part);
    queue.clear();
  }
  for (auto& queue : comm.recvs) {
    for (auto& part : queue) fail_part(part);
    queue.clear();
  }
}

void Engine::kill_session(Session& session, const std::string& reason) {
  spdlog::warn("session {} ({}): {}; closing it", session.id(), session.describe(), reason);
  const uint64_t id = session.id();
  remove_session(id, reason);
  close_session_(id, reason);
}

bool Engine::poll_session(Session& session) {
  shm::DaemonRingEnd& ring = *session.ring_end;
  uint32_t space = ring.completion_space();
  if (ring.corrupt()) {
    kill_session(session, ring.corruption());
    return true;
  }
  uint32_t allowed = space > session.inflight ? space - session.inflight : 0;
  uint32_t n = ring.consume(batch_.data(), std::min(allowed, kBatchEntries));
  if (ring.corrupt()) {
    kill_session(session, ring.corruption());
    return true;
  }
  for (uint32_t i = 0; i < n && !session.removed; ++i) {
    ++session.inflight;
    session.ops_submitted.fetch_add(1, std::memory_order_relaxed);
    accept_entry(session, batch_[i]);
  }
  return n > 0;
}

void Engine::handle_entry(Session& session, const shm::SubmissionEntry& raw) {
  Contribution part;
  part.session = &session;
  shm::ValidationResult result = shm::validate_entry_fields(raw, &part.entry);
  if (result.ok() && part.entry.stream_ordered) {
    result = shm::validate_stream_flags(part.entry.stream_flags, session.pool.size());
  }
  if (!result.ok()) {
    watch_.count_bad_entry(session);
    refuse_entry(session, raw, result.status, result.error);
    return;
  }
  // The client learnt its handle only after add_comm ran here (ControlServer::form_comm).
  auto it = session.comms.find(part.entry.comm);
  if (it == session.comms.end()) {
    watch_.count_bad_entry(session);
    refuse_entry(session, raw, PLEXUS_ERR_INVALID_ARGUMENT,
                 "communicator handle " + std::to_string(part.entry.comm) +
                     " is not a communicator of this process");
    return;
  }
  Comm& comm = *it->second.comm;
  part.rank = it->second.rank;
  if (comm.broken()) {
    refuse_entry(session, raw, comm.broken_status(), comm.broken_reason());
    return;
  }
  result = shm::validate_entry_buffers(
      raw, comm.nranks(), part.rank, [&](uint32_t region) { return session.region_bytes(region); },
      &part.entry);
  if (!result.ok()) {
    watch_.count_bad_entry(session);
    refuse_entry(session, raw, result.status,
                 std::string(shm::opcode_name(raw.opcode)) + " on rank " +
                     std::to_string(part.rank) + ": " + result.error);
    return;
  }
  if (part.entry.send.bytes > 0 && part.entry.send.region == shm::kHostPoolRegion) {
    part.send = session.region_base(part.entry.send.region) + part.entry.send.offset;
  }
  if (part.entry.recv.bytes > 0 && part.entry.recv.region == shm::kHostPoolRegion) {
    part.recv = session.region_base(part.entry.recv.region) + part.entry.recv.offset;
  }
  // An op on GPU buffers or a stream is found again at its completion by its user_data, so
  // that must be its own among the session's ops in flight: an entry that would share it
  // with such an op, either way round, is refused and the op in flight left untouched.
  const bool keyed_by_id = part.entry.stream_ordered ||
                           part.entry.send.region != shm::kHostPoolRegion ||
                           part.entry.recv.region != shm::kHostPoolRegion;
  const bool id_in_flight = session.ops_in_flight.contains(raw.user_data);
  if (id_in_flight && (keyed_by_id || session.staged_ops.contains(raw.user_data) ||
                       session.stream_releases.contains(raw.user_data))) {
    watch_.count_bad_entry(session);
    refuse_entry(session, raw, PLEXUS_ERR_INVALID_ARGUMENT,
                 "user_data " + std::to_string(raw.user_data) +
                     " is already in flight on GPU buffers or a stream");
    return;
  }
  gpu::StagedOp* staged = nullptr;
  if (part.entry.send.region != shm::kHostPoolRegion ||
      part.entry.recv.region != shm::kHostPoolRegion) {
    std::string error;
    // A send or receive within the node needs no host copy: one copy moves it when matched.
    // Nor do a copy collective within the node (its blocks moved by the copy engines) and
    // a collective the daemon's kernel reduces on the GPU, where the spans lie.
    const bool direct = (shm::is_point_to_point(part.entry.opcode) && part.entry.peer >= 0 &&
                         part.entry.peer < comm.nranks() &&
                         !comm.members()[static_cast<size_t>(part.entry.peer)].remote) ||
                        gpu_.moves_directly(comm, part.entry);
    if (const plexus_result_t status = gpu_.stage(session, part, direct, &staged, &error);
        status != PLEXUS_SUCCESS) {
      refuse_entry(session, raw, status,
                   std::string(shm::opcode_name(raw.opcode)) + " on rank " +
                       std::to_string(part.rank) + ": " + error);
      return;
    }
  }
  if (part.entry.stream_ordered) {
    session.stream_releases.emplace(
        raw.user_data, Session::StreamRelease{part.entry.stream_flags, part.entry.stream_ticket});
  }
  ++session.ops_in_flight[raw.user_data];
  // The engine goes on with other work while the copy engines bring the input in; the
  // session's later ops queue behind it.
  std::string copy_error;
  if (staged != nullptr) gpu_.start_input(session, *staged);
  if (!session.staging.empty() ||
      (staged != nullptr &&
       (!gpu_.may_leave_staging(session, &comm, *staged, part.entry, &copy_error) ||
        !copy_error.empty()))) {
    session.staging.push_back(std::move(part));
    return;
  }
  dispatch(comm, std::move(part));
}

void Engine::dispatch(Comm& comm, Contribution part) {
  if (is_point_to_point(part.entry.opcode)) {
    submit_p2p(comm, std::move(part));
  } else {
    submit_collective(comm, std::move(part));
  }
}

void Engine::submit_collective(Comm& comm, Contribution part) {
  const auto rank = static_cast<size_t>(part.rank);
  if (!comm.first_departure.empty() || comm.next_seq[rank] >= comm.remote_limit) {
    complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST,
             comm.first_departure.empty() ? comm.remote_departure : comm.first_departure);
    return;
  }
  const uint64_t seq = comm.next_seq[rank]++;
  const size_t index = seq - comm.first_seq;
  while (comm.collectives.size() <= index) {
    comm.collectives.emplace_back();
    comm.collectives.back().parts.resize(static_cast<size_t>(comm.nranks()));
  }
  PendingCollective& op = comm.collectives[index];
  op.parts[rank] = std::move(part);
  ++op.arrived;
  if (watch_.timing()) watch_.note_arrival(comm, op, static_cast<int>(rank));
  run_ready_collectives(comm);
}

void Engine::run_ready_collectives(Comm& comm) {
  if (comm.internode) {
    // One op between daemons at a time, in op order; the next starts when it finishes.
    if (!comm.internode->active && !comm.collectives.empty() &&
        comm.collectives.front().arrived == comm.local_ranks()) {
      start_internode_op(comm, comm.collectives.front());
    }
    return;
  }
  while (!comm.collectives.empty() && comm.collectives.front().arrived == comm.nranks()) {
    execute_collective(comm, comm.collectives.front(), comm.first_seq);
    if (comm.collectives.empty()) return;  // the op failed the communicator
    comm.collectives.pop_front();
    ++comm.first_seq;
  }
}

std::string Engine::find_mismatch(const Comm& comm, const PendingCollective& op,
                                  uint64_t seq) const {
  size_t first_rank = 0;
  while (first_rank < op.parts.size() && op.parts[first_rank].session == nullptr) ++first_rank;
  if (first_rank == op.parts.size()) return {};
  const auto& first = op.parts[first_rank].entry;
  const std::string where = "collective #" + std::to_string(seq) + " of communicator " +
                            token_prefix(comm.token()) + ": ";
  const std::string first_name = "rank " + std::to_string(first_rank);
  for (size_t r = first_rank + 1; r < op.parts.size(); ++r) {
    if (op.parts[r].session == nullptr) continue;  // another node's rank
    const auto& e = op.parts[r].entry;
    const std::string ranks = first_name + " passed ";
    if (e.opcode != first.opcode) {
      return where + first_name + " called " +
             shm::opcode_name(static_cast<uint8_t>(first.opcode)) + " but rank " +
             std::to_string(r) + " called " + shm::opcode_name(static_cast<uint8_t>(e.opcode));
    }
    if (e.count != first.count) {
      return where + "count mismatch: " + ranks + std::to_string(first.count) + ", rank " +
             std::to_string(r) + " passed " + std::to_string(e.count);
    }
    if (e.dtype != first.dtype) {
      return where + "dtype mismatch: " + ranks + std::string(shm::dtype_name(first.dtype)) +
             ", rank " + std::to_string(r) + " passed " + std::string(shm::dtype_name(e.dtype));
    }
    if (uses_redop(first.opcode) && e.redop != first.redop) {
      return where + "reduction op mismatch: " + ranks + std::string(shm::redop_name(first.redop)) +
             ", rank " + std::to_string(r) + " passed " + std::string(shm::redop_name(e.redop));
    }
    if (is_rooted(first.opcode) && e.peer != first.peer) {
      return where + "root mismatch: " + ranks + std::to_string(first.peer) + ", rank " +
             std::to_string(r) + " passed " + std::to_string(e.peer);
    }
  }
  return {};
}

void Engine::execute_collective(Comm& comm, PendingCollective& op, uint64_t seq) {
  std::string mismatch = find_mismatch(comm, op, seq);
  if (!mismatch.empty()) {
    // Later collectives would be matched against the wrong calls: the communicator
    // cannot continue, as with NCCL.
    spdlog::warn("{}", mismatch);
    fail_comm(comm, PLEXUS_ERR_MISMATCH, mismatch, nullptr);
    return;
  }
  const auto& first = op.parts[0].entry;
  if (gpu_.start_collective(comm, op, seq)) return;
  CollectiveArgs args{first.opcode, first.dtype, first.redop, first.count, first.peer};
  const uint64_t bytes = executor_.run(args, op.parts);
  watch_.count_completed(comm, bytes, first);
  if (watch_.timing()) watch_.record_finished(comm, op, seq, "local", PLEXUS_SUCCESS);
  for (auto& part : op.parts) complete(part.session, part.entry.user_data, PLEXUS_SUCCESS, {});
}

void Engine::submit_p2p(Comm& comm, Contribution part) {
  const auto n = static_cast<size_t>(comm.nranks());
  if (comm.sends.size() != n * n) {
    comm.sends.resize(n * n);
    comm.recvs.resize(n * n);
  }
  const bool is_send = part.entry.opcode == shm::Opcode::kSend;
  const auto self = static_cast<size_t>(part.rank);
  const auto peer = static_cast<size_t>(part.entry.peer);
  if (comm.members()[peer].remote) {
    submit_remote_p2p(comm, std::move(part));
    return;
  }
  if (const std::string* departure = departure_of(comm, part.entry.peer)) {
    complete(part.session, part.entry.user_data, PLEXUS_ERR_PEER_LOST, *departure);
    return;
  }
  const size_t key = is_send ? self * n + peer : peer * n + self;
  auto& sends = comm.sends[key];
  auto& recvs = comm.recvs[key];
  (is_send ? sends : recvs).push_back(std::move(part));
  while (!sends.empty() && !recvs.empty()) {
    Contribution send = std::move(sends.front());
    Contribution recv = std::move(recvs.front());
    sends.pop_front();
    recvs.pop_front();
    if (send.entry.count != recv.entry.count || send.entry.dtype != recv.entry.dtype) {
      const std::string message =
          "send from rank " + std::to_string(send.rank) + " to rank " + std::to_string(recv.rank) +
          " carries " + std::to_string(send.entry.count) + " " +
          std::string(shm::dtype_name(send.entry.dtype)) + " but the matching recv expects " +
          std::to_string(recv.entry.count) + " " + std::string(shm::dtype_name(recv.entry.dtype));
      complete(send.session, send.entry.user_data, PLEXUS_ERR_MISMATCH, message);
      complete(recv.session, recv.entry.user_data, PLEXUS_ERR_MISMATCH, message);
      continue;
    }
    watch_.count_completed(comm, recv.entry.recv.bytes, send.entry, &recv.entry);
    if (!send.session->staged_ops.empty() || !recv.session->staged_ops.empty()) {
      if (gpu_.direct_op(send) || gpu_.direct_op(recv)) {
        gpu_.start_direct_copy(std::move(send), std::move(recv));
        continue;
      }
    }
    executor_.copy(recv.recv, send.send, recv.entry.recv.bytes);
    complete(send.session, send.entry.user_data, PLEXUS_SUCCESS, {});
    complete(recv.session, recv.entry.user_data, PLEXUS_SUCCESS, {});
  }
}

void Engine::refuse_entry(Session& session, const shm::SubmissionEntry& raw, plexus_result_t status,
                          const std::string& message) {
  // Whatever else is wrong with it, a stream waiting on the entry is let go.
  if ((raw.flags & shm::kEntryStreamOrdered) != 0 && raw.stream_ticket != 0 &&
      shm::validate_stream_flags(raw.stream_flags, session.pool.size()).ok()) {
    shm::release_stream(shm::stream_flags_at(session.pool.data(), raw.stream_flags),
                        raw.stream_ticket);
  }
  post_completion(&session, raw.user_data, status, message);
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
  finish_op(session, user_data, status, message);
}

void Engine::finish_op(Session* session, uint64_t user_data, plexus_result_t status,
                       const std::string& message) {
  if (!session->stream_releases.empty()) release_stream(*session, user_data);
  if (auto it = session->ops_in_flight.find(user_data); it != session->ops_in_flight.end()) {
    if (--it->second == 0) session->ops_in_flight.erase(it);
  }
  post_completion(session, user_data, status, message);
}

void Engine::post_completion(Session* session, uint64_t user_data, plexus_result_t status,
                             const std::string& message) {
  if (session == nullptr || session->removed) return;
  if (status != PLEXUS_SUCCESS && session->job_counters) {
    bump_single_writer(session->job_counters->failed_completions, uint64_t{1});
  }
  shm::CompletionEntry entry;
  entry.user_data = user_data;
  entry.status = status;
  entry.message_len = static_cast<uint32_t>(std::min(message.size(), shm::kCompletionMessageBytes));
  std::memcpy(entry.message, message.data(), entry.message_len);
  session->ring_end->post(entry);
  if (session->inflight > 0) --session->inflight;
  if (!session->needs_publish) {
    session->needs_publish = true;
    to_publish_.push_back(session);
  }
}

void Engine::publish_completions() {
  for (Session* session : to_publish_) {
    session->needs_publish = false;
    if (session->ring_end->publish()) shm::signal_eventfd(session->completion_eventfd.get());
  }
  to_publish_.clear();
}

}  // namespace plexus::daemon
