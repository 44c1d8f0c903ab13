// GPU allocations registered by rank processes: checked and mapped here (a VMM allocation's
// handle comes as the message's one file descriptor; the driver's blocking calls stay off
// the engine thread), registered as a region by the engine (which owns the GPU state),
// answered here.
#include <cstring>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "daemon/control/control_server.h"
#include "daemon/control/daemon_reply.h"
#include "daemon/engine/engine.h"
#include "shm/control.capnp.h"

namespace plexus::daemon {

namespace control = shm::control;

void ControlServer::handle_register_gpu_memory(const Session& session, uint32_t request_id,
                                               control::GpuMemory::Reader memory,
                                               std::vector<common::UniqueFd> fds) {
  const uint64_t id = session.id();
  if (session.role() != SessionRole::kRank) {
    send_error(id, request_id, PLEXUS_ERR_PROTOCOL, "an admin session cannot register GPU memory");
    return;
  }
  auto handle = memory.getIpcHandle();
  auto uuid = memory.getDeviceUuid();
  const bool vmm = memory.getHandleType() == control::GpuHandleType::POSIX_FD;
  if (memory.getHandleType() != control::GpuHandleType::CUDA_IPC && !vmm) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               "GPU handle type " + std::to_string(static_cast<int>(memory.getHandleType())) +
                   " is not one this daemon knows (cudaIpc or posixFd)");
    return;
  }
  const size_t want_handle = vmm ? 0 : shm::kGpuIpcHandleBytes;
  if (handle.size() != want_handle || uuid.size() != shm::kGpuUuidBytes) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               std::string("a ") + (vmm ? "posixFd" : "cudaIpc") + " GPU registration needs a " +
                   std::to_string(want_handle) + "-byte ipcHandle and a " +
                   std::to_string(shm::kGpuUuidBytes) + "-byte deviceUuid, not " +
                   std::to_string(handle.size()) + " and " + std::to_string(uuid.size()));
    return;
  }
  if (fds.size() != (vmm ? 1u : 0u)) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               std::string("a ") + (vmm ? "posixFd" : "cudaIpc") + " GPU registration carries " +
                   (vmm ? "one file descriptor" : "no file descriptor") + ", not " +
                   std::to_string(fds.size()));
    return;
  }
  shm::GpuExport exported;
  std::memcpy(exported.ipc_handle.data(), handle.begin(), handle.size());
  std::memcpy(exported.device_uuid.data(), uuid.begin(), uuid.size());
  exported.bytes = memory.getBytes();
  if (vmm) exported.posix_fd = std::make_shared<const common::UniqueFd>(std::move(fds.front()));
  if (exported.bytes == 0) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, "a GPU allocation of 0 bytes");
    return;
  }
  // The driver's calls (its start on the first registration, then opening each handle)
  // block: here they hold up other processes' control messages, not their collectives.
  if (!device_memory_ && no_device_memory_.empty()) {
    common::Result<std::shared_ptr<gpu::DeviceMemory>> opened = gpu::open_device_memory();
    if (opened.ok()) {
      device_memory_ = opened.take();
      spdlog::info("GPU buffers: {}", device_memory_->describe());
    } else {
      no_device_memory_ = opened.error();
      spdlog::warn("GPU buffers refused: {}", no_device_memory_);
    }
  }
  if (!device_memory_) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               "this daemon cannot take GPU buffers: " + no_device_memory_);
    return;
  }
  common::Result<std::shared_ptr<gpu::DeviceMapping>> opened = device_memory_->open(exported);
  if (!opened.ok()) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               "GPU allocation of " + std::to_string(exported.bytes) + " bytes from " +
                   session.describe() + ": " + opened.error());
    return;
  }
  std::shared_ptr<gpu::DeviceMapping> mapping = opened.take();
  engine_.post([this, id, request_id, device = device_memory_, mapping](Engine& engine) {
    common::Result<uint32_t> region = engine.register_gpu_memory(id, device, mapping);
    post([this, id, request_id, region = std::move(region)] {
      if (!region) {
        send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, region.error());
        return;
      }
      capnp::MallocMessageBuilder reply;
      auto root = daemon_reply(reply, request_id);
      root.setGpuMemoryReply(*region);
      if (Connection* c = find_connection(id)) send_message(*c, reply);
    });
  });
}

void ControlServer::handle_release_gpu_memory(const Session& session, uint32_t request_id,
                                              uint32_t region) {
  const uint64_t id = session.id();
  engine_.post([this, id, request_id, region](Engine& engine) {
    const bool released = engine.release_gpu_memory(id, region);
    post([this, id, request_id, region, released] {
      if (!released) {
        send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
                   "GPU region " + std::to_string(region) + " is not registered by this process");
        return;
      }
      capnp::MallocMessageBuilder reply;
      auto root = daemon_reply(reply, request_id);
      root.setReleaseGpuMemoryReply();
      if (Connection* c = find_connection(id)) send_message(*c, reply);
    });
  });
}

}  // namespace plexus::daemon
