#include "tests/integration/raw_client.h"

#include "shm/framing.h"
#include "shm/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace plexus::test {

namespace control = shm::control;

RawClient::RawClient(const std::string& socket_path)
    : channel_(std::make_unique<client::ControlChannel>(socket_path, 1000)) {}

namespace {

std::string gpu_memory_answer(const client::Reply& reply) {
  capnp::FlatArrayMessageReader reader(reply.words, common::untrusted_reader_options());
  auto answer = reader.getRoot<control::DaemonMessage>();
  if (answer.isError()) return answer.getError().getMessage().cStr();
  if (answer.isGpuMemoryReply()) return "region " + std::to_string(answer.getGpuMemoryReply());
  if (answer.isReleaseGpuMemoryReply()) return "released";
  return "other reply";
}

}  // namespace

std::string RawClient::register_gpu_memory(std::span<const uint8_t> ipc_handle,
                                           std::span<const uint8_t> device_uuid, uint64_t bytes,
                                           uint16_t handle_type, std::span<const int> fds) {
  capnp::MallocMessageBuilder message;
  auto memory = message.initRoot<control::ClientMessage>().initRegisterGpuMemory();
  memory.setIpcHandle(kj::arrayPtr(ipc_handle.data(), ipc_handle.size()));
  memory.setDeviceUuid(kj::arrayPtr(device_uuid.data(), device_uuid.size()));
  memory.setBytes(bytes);
  memory.setHandleType(static_cast<control::GpuHandleType>(handle_type));
  return gpu_memory_answer(channel_->call(message, fds));
}

uint32_t RawClient::register_export(const shm::GpuExport& e) {
  std::array<uint8_t, shm::kGpuIpcHandleBytes> handle;
  std::array<uint8_t, shm::kGpuUuidBytes> uuid;
  std::memcpy(handle.data(), e.ipc_handle.data(), handle.size());
  std::memcpy(uuid.data(), e.device_uuid.data(), uuid.size());
  const std::string reply = register_gpu_memory(handle, uuid, e.bytes);
  if (!reply.starts_with("region ")) {
    ADD_FAILURE() << "registering a GPU allocation: " << reply;
    return 0;
  }
  return static_cast<uint32_t>(std::stoul(reply.substr(7)));
}

std::string RawClient::release_gpu_memory(uint32_t region) {
  capnp::MallocMessageBuilder message;
  message.initRoot<control::ClientMessage>().setReleaseGpuMemory(region);
  return gpu_memory_answer(channel_->call(message));
}

std::string RawClient::hello_with_fd(int fd, uint64_t declared_bytes) {
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<control::ClientMessage>().initHello();
  hello.setProtocolVersion(shm::kProtocolVersion);
  hello.setRole(control::Role::RANK);
  hello.setPoolBytes(declared_bytes);
  hello.setProcessName("raw-client");
  if (!job_.empty()) hello.setJobName(job_);
  client::Reply reply = channel_->call(message, std::span<const int>(&fd, 1));
  capnp::FlatArrayMessageReader reader(reply.words);
  auto root = reader.getRoot<control::DaemonMessage>();
  if (root.isError()) return root.getError().getMessage();
  if (!root.isHelloReply() || reply.fds.size() != 3) return "unexpected hello reply";
  rings_.emplace(shm::RingMemory::attach(std::move(reply.fds[0])));
  ring_end_.emplace(*rings_);
  submission_eventfd_ = std::move(reply.fds[1]);
  completion_eventfd_ = std::move(reply.fds[2]);
  return {};
}

void RawClient::hello_with_pool(size_t pool_bytes) {
  pool_ = std::make_unique<shm::ClientPool>(pool_bytes);
  std::string error = hello_with_fd(pool_->fd(), pool_bytes);
  if (!error.empty()) throw std::runtime_error("hello refused: " + error);
}

uint32_t RawClient::comm_init(const uint8_t (&token)[16], uint32_t nranks, uint32_t rank,
                              uint32_t timeout_ms, const RootDaemon& root) {
  capnp::MallocMessageBuilder message;
  auto init = message.initRoot<control::ClientMessage>().initCommInit();
  init.setToken(kj::arrayPtr(reinterpret_cast<const kj::byte*>(token), 16));
  init.setNranks(nranks);
  init.setRank(rank);
  init.setTimeoutMs(timeout_ms);
  init.setRootInstance(root.instance);
  auto addresses = init.initRootAddresses(static_cast<unsigned>(root.addresses.size()));
  for (size_t i = 0; i < root.addresses.size(); ++i) {
    addresses.set(static_cast<unsigned>(i), root.addresses[i]);
  }
  client::Reply reply = channel_->call(message);
  capnp::FlatArrayMessageReader reader(reply.words);
  auto answer = reader.getRoot<control::DaemonMessage>();
  if (answer.isError()) throw std::runtime_error(answer.getError().getMessage().cStr());
  return answer.getCommInitReply().getComm();
}

RootDaemon RawClient::root_of(const std::string& socket_path) {
  client::ControlChannel channel(socket_path, 1000);
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<control::ClientMessage>().initHello();
  hello.setProtocolVersion(shm::kProtocolVersion);
  hello.setRole(control::Role::ADMIN);
  client::Reply reply = channel.call(message);
  capnp::FlatArrayMessageReader reader(reply.words);
  auto root = reader.getRoot<control::DaemonMessage>();
  if (!root.isHelloReply()) throw std::runtime_error("the daemon refused an admin hello");
  RootDaemon out;
  out.instance = root.getHelloReply().getInstanceId();
  for (auto address : root.getHelloReply().getPeerAddresses())
    out.addresses.push_back(address.cStr());
  return out;
}

void RawClient::hello_admin() {
  capnp::MallocMessageBuilder message;
  auto hello = message.initRoot<control::ClientMessage>().initHello();
  hello.setProtocolVersion(shm::kProtocolVersion);
  hello.setRole(control::Role::ADMIN);
  channel_->call(message);
}

RawClient::Counters RawClient::status() {
  capnp::MallocMessageBuilder message;
  message.initRoot<control::ClientMessage>().setStatus();
  client::Reply reply = channel_->call(message);
  capnp::FlatArrayMessageReader reader(reply.words);
  auto root = reader.getRoot<control::DaemonMessage>();
  if (!root.isStatusReply()) throw std::runtime_error("status refused");
  auto status = root.getStatusReply();
  return Counters{status.getBadEntries(), status.getBadMessages()};
}

void RawClient::submit(const shm::SubmissionEntry& entry) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (ring_end_->submission_space() == 0) {
    if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("SQ stayed full");
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ring_end_->stage(entry);
  if (ring_end_->publish()) shm::signal_eventfd(submission_eventfd_.get());
}

std::optional<shm::CompletionEntry> RawClient::next_completion(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  shm::CompletionEntry entry;
  while (!ring_end_->poll_completion(&entry)) {
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  // As libplexus does: freed completion slots may be what a parked daemon waits for.
  if (ring_end_->daemon_parked_with_backlog()) shm::signal_eventfd(submission_eventfd_.get());
  return entry;
}

bool RawClient::closed_by_daemon(int timeout_ms) {
  pollfd pfd{channel_->fd(), POLLRDHUP, 0};
  return ::poll(&pfd, 1, timeout_ms) > 0 && (pfd.revents & (POLLRDHUP | POLLHUP)) != 0;
}

bool daemon_closes_after(const std::string& socket_path, const std::string& bytes, int timeout_ms,
                         std::span<const int> fds) {
  common::UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr = shm::unix_socket_address(socket_path);
  if (::connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw std::runtime_error("connect failed");
  }
  std::string error = shm::send_frame(
      sock.get(), std::span(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()), fds);
  if (!error.empty()) throw std::runtime_error(error);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{sock.get(), POLLIN | POLLRDHUP, 0};
    if (::poll(&pfd, 1, 50) <= 0) continue;
    char buffer[4096];
    ssize_t n = ::recv(sock.get(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;  // replies are read and dropped
  }
  return false;
}

}  // namespace plexus::test
