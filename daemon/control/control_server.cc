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

#include "daemon/control/admin_access.h"
#include "daemon/control/control_connection.h"
#include "daemon/control/daemon_reply.h"
#include "shm/ring.h"
#include "shm/unix_socket.h"

namespace plexus::daemon {

namespace control = shm::control;

namespace {

std::runtime_error os_error(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

// One registry of the sessions' pools for the whole daemon, shared with the peer server's
// RDMA paths (whoever made the config may have made it already).
ControlConfig with_sendable_memory(ControlConfig config) {
  if (!config.peers.sendable_memory) {
    config.peers.sendable_memory = std::make_shared<transports::SendableMemory>();
  }
  return config;
}

}  // namespace

ControlServer::ControlServer(const ControlConfig& config, Engine& engine,
                             std::shared_ptr<gpu::DeviceMemory> device_memory)
    : config_(with_sendable_memory(config)),
      engine_(engine),
      device_memory_(std::move(device_memory)),
      comms_(config_, engine,
             CommService::Hooks{.reply =
                                    [this](uint64_t id, capnp::MessageBuilder& reply) {
                                      Connection* c = find_connection(id);
                                      return c != nullptr && send_message(*c, reply);
                                    },
                                .send_error =
                                    [this](uint64_t id, uint32_t request_id, plexus_result_t code,
                                           const std::string& message) {
                                      send_error(id, request_id, code, message);
                                    },
                                .post = [this](std::function<void()> fn) { post(std::move(fn)); },
                                .draining = [this] { return admin_service_.draining(); },
                                .session = [this](uint64_t id) { return session_of(id); }}),
      admin_service_(
          config, engine,
          AdminService::Hooks{
              .reply =
                  [this](uint64_t id, capnp::MessageBuilder& reply) {
                    Connection* c = find_connection(id);
                    return c != nullptr && send_message(*c, reply);
                  },
              .error =
                  [this](uint64_t id, uint32_t request_id, plexus_result_t code,
                         const std::string& message) { send_error(id, request_id, code, message); },
              .post = [this](std::function<void()> fn) { post(std::move(fn)); },
              .sessions = [this] { return sessions(); },
              .comms = [this]() -> const std::vector<std::shared_ptr<const Comm>>& {
                return comms_.comms();
              },
              .peer_identity = [this] { return comms_.nodes().identity(); },
              .bad_messages = [this] { return bad_messages_; },
              .joins_pending = [this] { return comms_.forming(); }}),
      weights_(WeightService::Settings{.max_bytes = config.weight_store_bytes,
                                       .versions_kept = config.weight_versions,
                                       .copy_workers = config.weight_copy_workers},
               weight_hooks()) {
  comms_.nodes().on_weights_subscribe = [this](const transports::PeerIdentity& peer,
                                               uint64_t relay_id, uint64_t have) {
    weights_.on_node_subscribe(peer, relay_id, have);
  };
}

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
    comms_.start(&loop_);
    weights_.start(&loop_);
  } catch (...) {
    comms_.stop();
    uv_loop_close(&loop_);
    ::close(listen_fd_);
    listen_fd_ = -1;
    ::unlink(config_.socket_path.c_str());
    throw;
  }
  uv_async_init(&loop_, &wakeup_,
                [](uv_async_t* h) { static_cast<ControlServer*>(h->loop->data)->run_posted(); });
  uv_timer_init(&loop_, &path_watch_timer_);
  if (comms_.nodes().identity() != nullptr && config_.telemetry) {
    uv_timer_start(
        &path_watch_timer_,
        [](uv_timer_t* h) {
          static_cast<ControlServer*>(h->loop->data)->admin_service_.check_slow_paths();
        },
        AdminService::kPathWatchIntervalMs, AdminService::kPathWatchIntervalMs);
  }
  uv_timer_init(&loop_, &status_timer_);
  uv_timer_start(
      &status_timer_,
      [](uv_timer_t* h) {
        static_cast<ControlServer*>(h->loop->data)->admin_service_.report_status();
      },
      // The first a period after start: after READY=1 and its own STATUS (main()).
      AdminService::kStatusIntervalMs, AdminService::kStatusIntervalMs);
  uv_timer_init(&loop_, &idle_timer_);
  if (config_.idle_exit_s > 0) {
    uv_timer_start(
        &idle_timer_,
        [](uv_timer_t* h) { static_cast<ControlServer*>(h->loop->data)->check_idle(); }, 1000,
        1000);
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
  comms_.stop();
  uv_loop_close(&loop_);
  // After an idle exit the path may already be a newer daemon's socket.
  if (!socket_released_) ::unlink(config_.socket_path.c_str());
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
  comms_.close();
  weights_.close();
  uv_poll_stop(&listen_poll_);
  uv_close(reinterpret_cast<uv_handle_t*>(&listen_poll_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&wakeup_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&path_watch_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&idle_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&status_timer_), nullptr);
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
    // Access is decided by these credentials: a connection whose peer cannot be named is
    // refused, never served as whoever an unfilled PeerCredentials would say.
    const common::Result<PeerCredentials> creds = read_peer_credentials(fd);
    if (!creds) {
      ::close(fd);
      spdlog::warn("refused a local connection: its credentials cannot be read ({})",
                   creds.error());
      continue;
    }
    auto* connection = new Connection;
    connection->server = this;
    connection->fd.reset(fd);
    connection->id = next_session_id_++;
    connection->creds = *creds;
    connections_[connection->id] = connection;
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
      auto words = connection->decoder.next();
      if (!words.ok()) error = words.error();
      if (!words.ok() || !*words) break;
      handle_frame(*connection, std::move(**words));
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
      send_error(connection.id, request_id, PLEXUS_ERR_PROTOCOL,
                 "the first request must be a hello");
      close_connection(&connection, "it did not start with a hello");
      return;
    }
    switch (which) {
      case control::ClientMessage::HELLO:
        handle_hello(connection, request_id, message.getHello());
        break;
      case control::ClientMessage::COMM_INIT:
        comms_.init(*connection.session, request_id, message.getCommInit());
        break;
      case control::ClientMessage::COMM_LEAVE:
        comms_.leave(connection.id, request_id, message.getCommLeave());
        break;
      case control::ClientMessage::COMM_REVOKE:
        comms_.revoke(*connection.session, request_id, message.getCommRevoke());
        break;
      case control::ClientMessage::COMM_SHRINK:
        comms_.shrink(*connection.session, request_id, message.getCommShrink());
        break;
      case control::ClientMessage::COMM_GROW:
        comms_.grow(*connection.session, request_id, message.getCommGrow());
        break;
      case control::ClientMessage::COMM_GROW_ID:
        comms_.grow_id(*connection.session, request_id, message.getCommGrowId());
        break;
      case control::ClientMessage::COMM_SUSPEND:
        comms_.suspend(*connection.session, request_id, message.getCommSuspend());
        break;
      case control::ClientMessage::WEIGHTS_PUBLISH:
        weights_.publish(connection.session, request_id, message.getWeightsPublish());
        break;
      case control::ClientMessage::WEIGHTS_PULL:
        weights_.pull(*connection.session, request_id, message.getWeightsPull());
        break;
      case control::ClientMessage::WEIGHTS_LATEST:
        weights_.latest(*connection.session, request_id, message.getWeightsLatest());
        break;
      case control::ClientMessage::WEIGHTS_LIST:
        weights_.list(connection.id, request_id);
        break;
      case control::ClientMessage::WEIGHTS_ADVERTISE:
        weights_.advertise(*connection.session, request_id, message.getWeightsAdvertise());
        break;
      case control::ClientMessage::WEIGHTS_SUBSCRIBE:
        weights_.subscribe(*connection.session, request_id, message.getWeightsSubscribe());
        break;
      case control::ClientMessage::STATUS:
        admin_service_.status(connection.id, request_id);
        break;
      case control::ClientMessage::LINKS:
        admin_service_.links(connection.id, request_id);
        break;
      case control::ClientMessage::NIC_DRAIN:
        admin_service_.nic_drain(*connection.session, request_id, message.getNicDrain());
        break;
      case control::ClientMessage::NIC_FAULT:
        admin_service_.nic_fault(*connection.session, request_id, message.getNicFault().cStr());
        break;
      case control::ClientMessage::ENGINE_HOLD:
        admin_service_.engine_hold(*connection.session, request_id, message.getEngineHold());
        break;
      case control::ClientMessage::JOB_SET:
        admin_service_.job_set(*connection.session, request_id, message.getJobSet());
        break;
      case control::ClientMessage::OPS:
        admin_service_.ops(connection.id, request_id);
        break;
      case control::ClientMessage::CONFIG_SHOW:
        admin_service_.config_show(connection.id, request_id);
        break;
      case control::ClientMessage::CONFIG_RELOAD:
        admin_service_.config_reload(*connection.session, request_id);
        break;
      case control::ClientMessage::NODE_DRAIN:
        admin_service_.node_drain(*connection.session, request_id, message.getNodeDrain());
        break;
      case control::ClientMessage::EVENTS:
        admin_service_.events(connection.id, request_id, message.getEvents());
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
        send_error(connection.id, request_id, PLEXUS_ERR_PROTOCOL,
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
  const uint64_t id = connection.id;
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
  Session::Identity identity;
  identity.process_name = std::string(hello.getProcessName()).substr(0, 64);
  connection.process_name = identity.process_name;
  identity.job = job_label(hello.hasJobName() && hello.getJobName().size() > 0
                               ? std::string(hello.getJobName())
                               : identity.process_name);
  if (hello.getRole() == control::Role::RANK) {
    identity.job_counters = engine_.op_watch().job_counters().for_job(identity.job);
  }
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
  auto hello_reply = root.initHelloReply();
  hello_reply.setProtocolVersion(shm::kProtocolVersion);
  hello_reply.setSessionId(id);
  hello_reply.setDaemonPid(static_cast<uint32_t>(::getpid()));
  hello_reply.setInstanceId(comms_.nodes().instance_id());
  if (const transports::PeerIdentity* me = comms_.nodes().identity()) {
    const auto& addresses = me->addresses;
    auto list = hello_reply.initPeerAddresses(static_cast<unsigned>(addresses.size()));
    for (unsigned i = 0; i < list.size(); ++i) list.set(i, addresses[i]);
  }
  if (hello.getRole() == control::Role::ADMIN) {
    identity.role = SessionRole::kAdmin;
    if (!connection.received_fds.empty()) {
      ++bad_messages_;
      close_connection(&connection, "an admin hello carried file descriptors");
      return;
    }
    connection.session = std::make_shared<const Session>(id, connection.creds, std::move(identity));
    connection.greeted = true;
    send_message(connection, reply);
    return;
  }
  identity.role = SessionRole::kRank;
  connection.rank_hello = true;
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
  const common::Result<uint64_t> checked =
      shm::check_sealed_memfd(pool_fd.get(), hello.getPoolBytes(), config_.max_pool_bytes);
  const uint64_t pool_bytes = checked.ok() ? *checked : 0;
  std::string problem = checked.error();
  if (problem.empty() && pool_bytes == 0) problem = "the pool memfd is empty";
  if (!problem.empty()) {
    ++bad_messages_;
    send_error(id, request_id, PLEXUS_ERR_PROTOCOL, "pool refused: " + problem);
    close_connection(&connection, "pool refused: " + problem);
    return;
  }
  Session::Channels channels;
  try {
    channels.pool = shm::map_shared(pool_fd.get(), pool_bytes);
    channels.pool_announcement =
        config_.peers.sendable_memory->announce({channels.pool.data(), channels.pool.size()});
    channels.rings.emplace(shm::RingMemory::create(config_.sq_entries, config_.cq_entries));
    channels.submission_eventfd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    channels.completion_eventfd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!channels.submission_eventfd || !channels.completion_eventfd) throw os_error("eventfd");
  } catch (const std::exception& e) {
    send_error(id, request_id, PLEXUS_ERR_SYSTEM, std::string("session setup failed: ") + e.what());
    close_connection(&connection, std::string("session setup failed: ") + e.what());
    return;
  }
  auto session =
      std::make_shared<Session>(id, connection.creds, std::move(identity), std::move(channels));
  // From here the control thread keeps only a const view: the engine owns the rest.
  connection.session = session;
  connection.greeted = true;
  const int fds[] = {session->rings()->fd(), session->submission_eventfd(),
                     session->completion_eventfd()};
  if (!send_message(connection, reply, fds)) return;
  spdlog::info("session {}: {} uid {} connected, pool {} MiB", id, session->describe(),
               session->creds().uid, pool_bytes >> 20);
  engine_.post([s = std::move(session)](Engine& e) { e.add_session(s); });
}

void ControlServer::send_error(uint64_t session_id, uint32_t request_id, plexus_result_t code,
                               const std::string& message) {
  Connection* c = find_connection(session_id);
  if (c == nullptr || c->closing) return;
  capnp::MallocMessageBuilder reply;
  auto root = daemon_reply(reply, request_id);
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
  for (const auto& [id, c] : connections_) {
    if (c->session) out.push_back(c->session);
  }
  return out;
}

ControlServer::Connection* ControlServer::find_connection(uint64_t session_id) {
  auto it = connections_.find(session_id);
  return it == connections_.end() ? nullptr : it->second;
}

std::shared_ptr<const Session> ControlServer::session_of(uint64_t session_id) {
  Connection* c = find_connection(session_id);
  return c != nullptr ? c->session : nullptr;
}

void ControlServer::close_session(uint64_t session_id, const std::string& reason) {
  if (Connection* c = find_connection(session_id)) close_connection(c, reason);
}

void ControlServer::close_connection(Connection* connection, const std::string& reason) {
  if (connection->closing) return;
  connection->closing = true;
  const uint64_t id = connection->id;
  const std::string who = describe_process(connection->creds.pid, connection->process_name);
  if (connection->rank_hello) {
    spdlog::info("session {} ({}): {}", id, who, reason);
  } else {
    spdlog::debug("session {} ({}): {}", id, who, reason);
  }
  connections_.erase(id);
  comms_.session_closed(id);
  weights_.session_closed(id);
  engine_.post([id, reason](Engine& e) { e.remove_session(id, reason); });
  uv_poll_stop(&connection->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&connection->poll),
           [](uv_handle_t* h) { delete static_cast<Connection*>(h->data); });
}

}  // namespace plexus::daemon
