// GPU allocations registered by rank processes: checked here, mapped by the engine (which
// owns the GPU state), answered here.
#include <cstring>

#include "daemon/control_server.h"
#include "daemon/engine.h"
#include "shm/control.capnp.h"

namespace plexus::daemon {

namespace control = shm::control;

void ControlServer::handle_register_gpu_memory(const Session& session, uint32_t request_id,
                                               control::GpuMemory::Reader memory) {
  const uint64_t id = session.id();
  if (session.role != SessionRole::kRank) {
    send_error(id, request_id, PLEXUS_ERR_PROTOCOL, "an admin session cannot register GPU memory");
    return;
  }
  auto handle = memory.getIpcHandle();
  auto uuid = memory.getDeviceUuid();
  if (handle.size() != shm::kGpuIpcHandleBytes || uuid.size() != shm::kGpuUuidBytes) {
    send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT,
               "a GPU registration needs a " + std::to_string(shm::kGpuIpcHandleBytes) +
                   "-byte ipcHandle and a " + std::to_string(shm::kGpuUuidBytes) +
                   "-byte deviceUuid, not " + std::to_string(handle.size()) + " and " +
                   std::to_string(uuid.size()));
    return;
  }
  shm::GpuExport exported;
  std::memcpy(exported.ipc_handle.data(), handle.begin(), handle.size());
  std::memcpy(exported.device_uuid.data(), uuid.begin(), uuid.size());
  exported.bytes = memory.getBytes();
  engine_.post([this, id, request_id, exported](Engine& engine) {
    std::string error;
    const uint32_t region = engine.register_gpu_memory(id, exported, &error);
    post([this, id, request_id, region, error] {
      if (region == 0) {
        send_error(id, request_id, PLEXUS_ERR_INVALID_ARGUMENT, error);
        return;
      }
      capnp::MallocMessageBuilder reply;
      auto root = reply.initRoot<control::DaemonMessage>();
      root.setRequestId(request_id);
      root.setGpuMemoryReply(region);
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
      auto root = reply.initRoot<control::DaemonMessage>();
      root.setRequestId(request_id);
      root.setReleaseGpuMemoryReply();
      if (Connection* c = find_connection(id)) send_message(*c, reply);
    });
  });
}

}  // namespace plexus::daemon
