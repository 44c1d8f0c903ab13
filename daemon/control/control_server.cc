#include "daemon/control/control_server.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <capnp/serialize.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "shm/ring.h"
#include "shm/unix_socket.h"

namespace plexus::daemon {

namespace control = shm::control;

struct ControlServer::Connection {
  ControlServer* server = nullptr;
  uv_poll_t poll{};
  common::UniqueFd fd;
  std::shared_ptr<Session> session;
  common::FrameDecoder decoder{shm::kMaxClientFrameBytes};
  std::vector<common::UniqueFd> received_fds;
  bool greeted = false;
  bool closing = false;
};

namespace {

std::runtime_error os_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

ControlServer::ControlServer(const ControlConfig& config, Engine& engine,
                             std::shared_ptr<gpu::DeviceMemory> device_memory)
    : config_(config),
      engine_(engine),
      device_memory_(std::move(device_memory)),
      admin_service_(config, engine,
                     AdminService::Hooks{[this](uint64_t id, capnp::MessageBuilder& reply) {
                                           Connection* c = find_connection(id);
                                           return c != nullptr && send_message(*c, reply);
                                         },
                                         [this](uint64_t id, uint32_t request_id,
                                                plexus_result_t code, const std::string& message) {
                                           send_error(id, request_id, code, message);
                                         },
                                         [this](std::function<void()> fn) { post(std::move(fn)); },
                                         [this] { return sessions(); },
                                         [this]() -> const std::vector<std::shared_ptr<Comm>>& {
                                           prune_finished_comms();
                                           return comms_;
                                         },
                                         [this]() -> const transports::PeerIdentity* {
                                           return peers_ ? &peers_->identity() : nullptr;
                                         },
                                         [this] { return bad_messages_; }}) {}

ControlServer::~ControlServer() { stop(); }

void ControlServer::bind_socket() {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(config_.socket_path).parent_path();
  if (!dir.empty() && !fs::exists(dir)) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      throw std::runtime_error("cannot create socket directory " + dir.string() + ": " +
                               ec.message());
    // Root's directory is world-readable so every user's processes can connect; a
    // user daemon keeps its directory private.
    ::chmod(dir.c_str(), ::geteuid() == 0 ? 0755 : 0700);
  }
  if (fs::exists(fs::symlink_status(config_.socket_path))) {
    if (shm::unix_socket_answers(config_.socket_path)) {
      throw std::runtime_error("socket " + config_.socket_path + " is in use by a running plexusd");
    }
    ::unlink(config_.socket_path.c_str());  // stale, from a daemon that died
  }
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) throw os_error("socket");
  sockaddr_un addr = shm::unix_socket_address(config_.socket_path);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw os_error("bind " + config_.socket_path);
  }
  ::chmod(config_.socket_path.c_str(), 0666);
  if (::listen(listen_fd_, 128) != 0) throw os_error("listen " + config_.socket_path);
}

void ControlServer::start() {
  bind_socket();
  uv_loop_init(&loop_);
  loop_.data = this;
  try {
    start_peers();
  } catch (...) {
    peers_.reset();
    uv_loop_close(&loop_);
    ::close(listen_fd_);
    listen_fd_ = -1;
    ::unlink(config_.socket_path.c_str());
    throw;
  }
  uv_async_init(&loop_, &wakeup_,
                [](uv_async_t* h) { static_cast<ControlServer*>(h->loop->data)->run_posted(); });
  uv_timer_init(&loop_, &rendezvous_timer_);
  uv_timer_init(&loop_, &path_watch_timer_);
  if (peers_ && config_.telemetry) {
    uv_timer_start(
        &path_watch_timer_,
        [](uv_timer_t* h) {
          static_cast<ControlServer*>(h->loop->data)->admin_service_.check_slow_paths();
        },
        AdminService::kPathWatchIntervalMs, AdminService::kPathWatchIntervalMs);
  }
  uv_poll_init(&loop_, &listen_poll_, listen_fd_);
  uv_poll_start(&listen_poll_, UV_READABLE, [](uv_poll_t* h, int, int) {
    static_cast<ControlServer*>(h->loop->data)->on_listen_readable();
  });
  running_ = true;
  thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
  spdlog::info("plexusd listening on {}", config_.socket_path);
}

void ControlServer::stop() {
  if (!running_) return;
  {
    std::lock_guard lock(posted_mutex_);
    stop_requested_ = true;
  }
  uv_async_send(&wakeup_);
  thread_.join();
  running_ = false;
  peers_.reset();
  uv_loop_close(&loop_);
  ::unlink(config_.socket_path.c_str());
}

void ControlServer::post(std::function<void()> fn) {
  // Under the lock: once stop() has asked the thread to end, the loop and its async handle
  // are going away, and what the engine posts then (a link lost while both stop) is moot.
  std::lock_guard lock(posted_mutex_);
  if (stop_requested_) return;
  posted_.push_back(std::move(fn));
  uv_async_send(&wakeup_);
}

void ControlServer::run_posted() {
  std::vector<std::function<void()>> posted;
  bool stop = false;
  {
    std::lock_guard lock(posted_mutex_);
    posted.swap(posted_);
    stop = stop_requested_;
  }
  for (auto& fn : posted) fn();
  if (!stop) return;
  std::vector<Connection*> all;
  for (auto& [id, c] : connections_) all.push_back(c);
  for (Connection* c : all) close_connection(c, "the daemon is shutting down");
  if (peers_) peers_->close();
  uv_poll_stop(&listen_poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(&listen_poll_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&wakeup_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&rendezvous_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&path_watch_timer_), nullptr);
  ::close(listen_fd_);
  listen_fd_ = -1;
}

void ControlServer::on_listen_readable() {
  while (true) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EINTR) spdlog::warn("accept: {}", std::strerror(errno));
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
    auto* connection = new Connection;
    connection->server = this;
    connection->fd.reset(fd);
    connection->session = std::make_shared<Session>(next_session_id_++,
                                                    PeerCredentials{cred.pid, cred.uid, cred.gid});
    connections_[connection->session->id()] = connection;
    uv_poll_init(&loop_, &connection->poll, fd);
    connection->poll.data = connection;
    uv_poll_start(&connection->poll, UV_READABLE | UV_DISCONNECT, [](uv_poll_t* h, int, int) {
      auto* c = static_cast<Connection*>(h->data);
      c->server->on_connection_readable(c);
    });
  }
}

void ControlServer::on_connection_readable(Connection* connection) {
  std::byte buffer[16 * 1024];
  for (int reads = 0; reads < 64 && !connection->closing; ++reads) {
    bool truncated = false;
    ssize_t n = shm::recv_with_fds(connection->fd.get(), buffer, sizeof(buffer),
                                   &connection->received_fds, &truncated);
    if (n == 0) {
      close_connection(connection, "its connection closed (the process exited or was killed)");
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      close_connection(connection, std::string("its connection failed: ") + std::strerror(errno));
      return;
    }
    if (truncated || connection->received_fds.size() > shm::kMaxFdsPerFrame) {
      ++bad_messages_;
      close_connection(connection, "it sent more file descriptors than a request carries");
      return;
    }
    connection->decoder.append(buffer, static_cast<size_t>(n));
    std::string error;
    while (!connection->closing) {
      auto words = connection->decoder.next(&error);
      if (!words) break;
      handle_frame(*connection, std::move(*words));
    }
    if (!error.empty() && !connection->closing) {
      ++bad_messages_;
      close_connection(connection, "malformed frame: " + error);
      return;
    }
  }
}

void ControlServer::handle_frame(Connection& connection, kj::Array<capnp::word> words) {
  uint32_t request_id = 0;
  try {
    capnp::FlatArrayMessageReader reader(words, common::untrusted_reader_options());
    auto message = reader.getRoot<control::ClientMessage>();
    request_id = message.getRequestId();
    const auto which = message.which();
    if (!connection.greeted && which != control::ClientMessage::HELLO) {
      ++bad_messages_;
      send_error(connection.session->id(), request_id, PLEXUS_ERR_PROTOCOL,
                 "the first request must be a hello");
      close_connection(&connection, "it did not start with a hello");
      return;
    }
    switch (which) {
      case control::ClientMessage::HELLO:
        handle_hello(connection, request_id, message.getHello());
        break;
      case control::ClientMessage::COMM_INIT:
        handle_comm_init(connection, request_id, message.getCommInit());
        break;
      case control::ClientMessage::COMM_LEAVE:
        handle_comm_leave(connection, request_id, message.getCommLeave());
        break;
      case control::ClientMessage::STATUS:
        admin_service_.status(connection.session->id(), request_id);
        break;
      case control::ClientMessage::LINKS:
        admin_service_.links(connection.session->id(), request_id);
        break;
      case control::ClientMessage::NIC_DRAIN:
        admin_service_.nic_drain(*connection.session, request_id, message.getNicDrain());
        break;
      case control::ClientMessage::OPS:
        admin_service_.ops(connection.session->id(), request_id);
        break;
      case control::ClientMessage::EVENTS:
        admin_service_.events(connection.session->id(), request_id, message.getEvents());
        break;
      case control::ClientMessage::REGISTER_GPU_MEMORY: {
        std::vector<common::UniqueFd> fds = std::move(connection.received_fds);
        connection.received_fds.clear();
        handle_register_gpu_memory(*connection.session, request_id, message.getRegisterGpuMemory(),
                                   std::move(fds));
        break;
      }
      case control::ClientMessage::RELEASE_GPU_MEMORY:
        handle_release_gpu_memory(*connection.session, request_id, message.getReleaseGpuMemory());
        break;
      default:
        ++bad_messages_;
        send_error(connection.session->id(), request_id, PLEXUS_ERR_PROTOCOL,
                   "unknown request type " + std::to_string(static_cast<int>(which)));
        break;
    }
  } catch (const kj::Exception& e) {
    ++bad_messages_;
    close_connection(&connection, std::string("malformed request: ") + e.getDescription().cStr());
    return;
  } catch (const std::exception& e) {
    ++bad_messages_;
    close_connection(&connection, std::string("request failed: ") + e.what());
    return;
  }
  if (!connection.closing && !connection.received_fds.empty()) {
    ++bad_messages_;
    close_connection(&connection, "it sent file descriptors its request did not use");
  }
}

void ControlServer::handle_hello(Connection& connection, uint32_t request_id,
                                 control::Hello::Reader hello) {
  Session& session = *connection.session;
  const uint64_t id = session.id();
  if (connection.greeted) {
    ++bad_messages_;
    send_error(id, request_id, PLEXUS_ERR_PROTOCOL, "a second hello on one connection");
    close_connection(&connection, "it sent a second hello");
    return;
  }
  if (hello.getProtocolVersion() != shm::kProtocolVersion) {
    send_error(id, request_id, PLEXUS_ERR_VERSION,
               "client speaks protocol " + std::to_string(hello.getProtocolVersion()) +
                   ", this plexusd speaks " + std::to_string(shm::kProtocolVersion));
    close_connection(&connection, "protocol version mismatch");
    return;
  }
  session.process_name = std::string(hello.getProcessName()).substr(0, 64);
  session.job = job_label(hello.hasJobName() && hello.getJobName().size() > 0
                              ? std::string(hello.getJobName())
                              : session.process_name);
  if (hello.getRole() == control::Role::RANK) {
    session.job_counters = engine_.op_watch().job_counters().for_job(session.job);
  }
  connection.greeted = true;
  capnp::MallocMessageBuilder reply;
  auto root = reply.initRoot<control::DaemonMessage>();
  root.setRequestId(request_id);
  auto hello_reply = root.initHelloReply();
  hello_reply.setProtocolVersion(shm::kProtocolVersion);
  hello_reply.setSessionId(id);
  hello_reply.setDaemonPid(static_cast<uint32_t>(::getpid()));
  hello_reply.setInstanceId(instance_id_);
  if (peers_) {
    const auto& addresses = peers_->identity().addresses;
    auto list = hello_reply.initPeerAddresses(static_cast<unsigned>(addresses.size()));
    for (unsigned i = 0; i < list.size(); ++i) list.set(i, addresses[i]);
  }
  if (hello.getRole() == control::Role::ADMIN) {
    session.role = SessionRole::kAdmin;
    if (!connection.received_fds.empty()) {
      ++bad_messages_;
      close_connection(&connection, "an admin hello carried file descriptors");
      return;
    }
    send_message(connection, reply);
    return;
  }
  session.role = SessionRole::kRank;
  if (connection.received_fds.size() != 1) {
    ++bad_messages_;
    send_error(id, request_id, PLEXUS_ERR_PROTOCOL,
               "a rank hello must carry exactly one pool memfd, it carried " +
                   std::to_string(connection.received_fds.size()));
    close_connection(&connection, "hello without exactly one pool memfd");
    return;
  }
  common::UniqueFd pool_fd = std::move(connection.received_fds.front());
  connection.received_fds.clear();
  uint64_t pool_bytes = 0;
  std::string problem = shm::check_sealed_memfd(pool_fd.get(), hello.getPoolBytes(),
                                                config_.max_pool_bytes, &pool_bytes);
  if (problem.empty() && pool_bytes == 0) problem = "the pool memfd is empty";
  if (!problem.empty()) {
    ++bad_messages_;
    send_error(id, request_id, PLEXUS_ERR_PROTOCOL, "pool refused: " + problem);
    close_connection(&connection, "pool refused: " + problem);
    return;
  }
  try {
    session.pool = shm::map_shared(pool_fd.get(), pool_bytes);
    session.rings.emplace(shm::RingMemory::create(config_.sq_entries, config_.cq_entries));
    session.submission_eventfd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    session.completion_eventfd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!session.submission_eventfd || !session.completion_eventfd) throw os_error("eventfd");
  } catch (const std::exception& e) {
    send_error(id, request_id, PLEXUS_ERR_SYSTEM, std::string("session setup failed: ") + e.what());
    close_connection(&connection, std::string("session setup failed: ") + e.what());
    return;
  }
  const int fds[] = {session.rings->fd(), session.submission_eventfd.get(),
                     session.completion_eventfd.get()};
  if (!send_message(connection, reply, fds)) return;
  spdlog::info("session {}: {} uid {} connected, pool {} MiB", id, session.describe(),
               session.creds().uid, pool_bytes >> 20);
  engine_.post([s = connection.session](Engine& e) { e.add_session(s); });
}

void ControlServer::handle_comm_init(Connection& connection, uint32_t request_id,
                                     control::CommInit::Reader init) {
  Session& session = *connection.session;
  const uint64_t id = session.id();
  if (session.role != SessionRole::kRank) {
    send_error(id, request_id, PLEXUS_ERR_PROTOCOL, "an admin session cannot join communicators");
    return;
  }
  auto token_data = init.getToken();
  const uint32_t nranks = init.getNranks();
  const uint32_t rank = init.getRank();
  if (token_data.size() != sizeof(CommToken)) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               "the unique id's token has " + std::to_string(token_data.size()) +
                   " bytes, expected 16 (was it made by plexus_get_unique_id?)");
    return;
  }
  if (nranks == 0 || nranks > 65536 || rank >= nranks) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                   " is not a valid position (need 0 <= rank < nranks <= 65536)");
    return;
  }
  CommToken token;
  std::memcpy(token.data(), token_data.begin(), token.size());
  prune_finished_comms();
  for (const auto& comm : comms_) {
    if (comm->token() == token) {
      send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                 "communicator " + token_prefix(token) + " already formed with all " +
                     std::to_string(comm->nranks()) + " ranks; rank " + std::to_string(rank) +
                     " cannot join it again");
      return;
    }
  }
  const uint32_t timeout_ms = std::min<uint32_t>(init.getTimeoutMs(), 24u * 3600 * 1000);
  RootRef root{init.getRootInstance(), {}};
  for (auto address : init.getRootAddresses()) {
    if (root.addresses.size() < 8 && address.size() <= 64)
      root.addresses.emplace_back(address.cStr());
  }
  // A unique id made by this daemon while it serves no peers, or made where no daemon was
  // reachable, names a communicator of this node alone.
  if (root.instance == 0 || (peers_ == nullptr && root.instance == instance_id_)) {
    CommRendezvous::Joiner joiner{
        id,
        session.creds().pid,
        request_id,
        static_cast<int>(rank),
        std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms),
        0};
    auto result = rendezvous_.join(token, static_cast<int>(nranks), joiner);
    if (result.outcome == CommRendezvous::JoinResult::kRejected) {
      send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, result.error);
      return;
    }
    if (result.outcome == CommRendezvous::JoinResult::kFormed) {
      form_comm(token, static_cast<int>(nranks), result.members, std::nullopt);
    }
    arm_rendezvous_timer();
    return;
  }
  join_multi_node(session, request_id, token, static_cast<int>(nranks), static_cast<int>(rank),
                  timeout_ms, root, std::string(init.getAlgorithm()).substr(0, 33));
}

void ControlServer::form_comm(const CommToken& token, int nranks,
                              const std::vector<CommRendezvous::Joiner>& joiners,
                              std::optional<NodeSpan> span) {
  std::vector<Comm::Member> members(static_cast<size_t>(nranks));
  if (span) {
    for (int r = 0; r < nranks; ++r) {
      members[static_cast<size_t>(r)].remote =
          span->topology.rank_node[static_cast<size_t>(r)] != span->topology.my_node;
    }
  }
  for (const auto& joiner : joiners) {
    Comm::Member& member = members[static_cast<size_t>(joiner.rank)];
    member.session_id = joiner.session_id;
    member.pid = joiner.pid;
    if (Connection* c = find_connection(joiner.session_id)) {
      member.handle = c->session->next_comm_handle++;
    }
  }
  const bool multi = span.has_value();
  const size_t nodes = multi ? span->node_ids.size() : 1;
  auto comm = std::make_shared<Comm>(token, members, std::move(span));
  comms_.push_back(comm);
  if (multi) {
    spdlog::info("communicator {} ready: {} ranks on {} nodes, {} here", token_prefix(token),
                 nranks, nodes, comm->local_ranks());
  } else {
    spdlog::info("communicator {} formed with {} ranks", token_prefix(token), nranks);
  }
  // Each rank hears its handle only once the engine holds the communicator: an entry that
  // names the handle can then never reach the engine before the communicator does.
  struct Reply {
    uint64_t session_id;
    uint32_t request_id;
    uint32_t handle;
  };
  std::vector<Reply> replies;
  for (const auto& joiner : joiners) {
    replies.push_back(
        {joiner.session_id, joiner.request_id, members[static_cast<size_t>(joiner.rank)].handle});
  }
  engine_.post([this, comm, replies = std::move(replies)](Engine& e) {
    e.add_comm(comm);
    post([this, replies] {
      for (const Reply& r : replies) {
        Connection* c = find_connection(r.session_id);
        if (c == nullptr) continue;
        c->session->comm_count.fetch_add(1, std::memory_order_relaxed);
        capnp::MallocMessageBuilder reply;
        auto root = reply.initRoot<control::DaemonMessage>();
        root.setRequestId(r.request_id);
        root.initCommInitReply().setComm(r.handle);
        send_message(*c, reply);
      }
    });
  });
  arm_rendezvous_timer();
}

void ControlServer::handle_comm_leave(Connection& connection, uint32_t request_id,
                                      control::CommLeave::Reader leave) {
  const uint64_t id = connection.session->id();
  const uint32_t handle = leave.getComm();
  const bool abort = leave.getAbort();
  // Reply once the engine has failed what was pending, so the client sees those
  // completions before the reply.
  engine_.post([this, id, handle, abort, request_id](Engine& e) {
    e.leave_comm(id, handle, abort);
    post([this, id, request_id] {
      Connection* c = find_connection(id);
      if (c == nullptr) return;
      capnp::MallocMessageBuilder reply;
      auto root = reply.initRoot<control::DaemonMessage>();
      root.setRequestId(request_id);
      root.setCommLeaveReply();
      send_message(*c, reply);
    });
  });
}

void ControlServer::prune_finished_comms() {
  std::erase_if(comms_, [](const auto& comm) { return comm->finished.load(); });
}

void ControlServer::send_error(uint64_t session_id, uint32_t request_id, plexus_result_t code,
                               const std::string& message) {
  Connection* c = find_connection(session_id);
  if (c == nullptr || c->closing) return;
  capnp::MallocMessageBuilder reply;
  auto root = reply.initRoot<control::DaemonMessage>();
  root.setRequestId(request_id);
  auto error = root.initError();
  error.setCode(static_cast<uint32_t>(code));
  error.setMessage(message);
  send_message(*c, reply);
}

bool ControlServer::send_message(Connection& connection, capnp::MessageBuilder& message,
                                 std::span<const int> fds) {
  if (connection.closing) return false;
  std::vector<std::byte> frame = common::encode_frame(message);
  std::string error = shm::send_frame(connection.fd.get(), frame, fds);
  if (!error.empty()) {
    // A client that does not read its replies fills the socket; it loses the session.
    close_connection(&connection, "reply could not be sent: " + error);
    return false;
  }
  return true;
}

std::vector<std::shared_ptr<const Session>> ControlServer::sessions() const {
  std::vector<std::shared_ptr<const Session>> out;
  for (const auto& [id, c] : connections_) out.push_back(c->session);
  return out;
}

ControlServer::Connection* ControlServer::find_connection(uint64_t session_id) {
  auto it = connections_.find(session_id);
  return it == connections_.end() ? nullptr : it->second;
}

void ControlServer::close_session(uint64_t session_id, const std::string& reason) {
  if (Connection* c = find_connection(session_id)) close_connection(c, reason);
}

void ControlServer::close_connection(Connection* connection, const std::string& reason) {
  if (connection->closing) return;
  connection->closing = true;
  const uint64_t id = connection->session->id();
  if (connection->session->role == SessionRole::kRank && connection->greeted) {
    spdlog::info("session {} ({}): {}", id, connection->session->describe(), reason);
  } else {
    spdlog::debug("session {} ({}): {}", id, connection->session->describe(), reason);
  }
  connections_.erase(id);
  rendezvous_.drop_session(id);
  engine_.post([id, reason](Engine& e) { e.remove_session(id, reason); });
  uv_poll_stop(&connection->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&connection->poll),
           [](uv_handle_t* h) { delete static_cast<Connection*>(h->data); });
}

void ControlServer::arm_rendezvous_timer() {
  auto next = rendezvous_.next_deadline();
  if (auto multi = next_multi_node_deadline(); multi && (!next || *multi < *next)) next = multi;
  if (!next) {
    uv_timer_stop(&rendezvous_timer_);
    return;
  }
  auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      *next - std::chrono::steady_clock::now());
  uv_timer_start(
      &rendezvous_timer_,
      [](uv_timer_t* h) { static_cast<ControlServer*>(h->loop->data)->on_rendezvous_timer(); },
      static_cast<uint64_t>(std::max<int64_t>(0, wait.count()) + 1), 0);
}

void ControlServer::on_rendezvous_timer() {
  const auto now = std::chrono::steady_clock::now();
  expire_multi_node(now);
  for (const auto& expired : rendezvous_.expire(now)) {
    spdlog::warn("{} (rank {} pid {} gave up)", expired.message, expired.joiner.rank,
                 expired.joiner.pid);
    send_error(expired.joiner.session_id, expired.joiner.request_id, PLEXUS_ERR_TIMEOUT,
               expired.message);
  }
  std::erase_if(multi_joins_, [&](const auto& entry) { return !rendezvous_.has(entry.first); });
  arm_rendezvous_timer();
}

}  // namespace plexus::daemon
