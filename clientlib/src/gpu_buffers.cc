#include "clientlib/src/gpu_buffers.h"

#include <capnp/serialize.h>

#include <vector>

#include "clientlib/src/gpu_pointer.h"
#include "shm/framing.h"

namespace plexus::client {

namespace control = shm::control;

std::optional<GpuSpan> GpuBuffers::locate(ControlChannel& control, const void* ptr, uint64_t bytes,
                                          std::string* error) {
  std::optional<GpuPointer> pointer = query_gpu_pointer(ptr, error);
  if (!pointer) return std::nullopt;
  const GpuAllocation& a = pointer->allocation;
  const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
  const uint64_t offset = address - a.base;
  if (offset > a.bytes || bytes > a.bytes - offset) {
    *error = std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
             " run past the end of its " + std::to_string(a.bytes) + "-byte GPU allocation";
    return std::nullopt;
  }
  std::lock_guard lock(mutex_);
  uint32_t region = cache_.find(a);
  if (region == 0) {
    region = register_allocation(control, a, error);
    if (region == 0) return std::nullopt;
    for (uint32_t stale : cache_.insert(a, region)) release(control, stale);
  }
  return GpuSpan{region, offset};
}

bool GpuBuffers::forget(ControlChannel& control, const void* ptr) {
  std::lock_guard lock(mutex_);
  const uint32_t region =
      cache_.erase_containing(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr)));
  if (region == 0) return false;
  release(control, region);
  return true;
}

uint32_t GpuBuffers::register_allocation(ControlChannel& control, const GpuAllocation& allocation,
                                         std::string* error) {
  shm::GpuExport exported;
  *error = export_gpu_allocation(allocation, &exported);
  if (!error->empty()) return 0;
  capnp::MallocMessageBuilder message;
  auto memory = message.initRoot<control::ClientMessage>().initRegisterGpuMemory();
  if (!exported.posix_fd) {
    memory.setIpcHandle(kj::arrayPtr(reinterpret_cast<const kj::byte*>(exported.ipc_handle.data()),
                                     exported.ipc_handle.size()));
  }
  memory.setDeviceUuid(kj::arrayPtr(reinterpret_cast<const kj::byte*>(exported.device_uuid.data()),
                                    exported.device_uuid.size()));
  memory.setBytes(exported.bytes);
  std::vector<int> fds;
  if (exported.posix_fd) {
    memory.setHandleType(control::GpuHandleType::POSIX_FD);
    fds.push_back(exported.posix_fd->get());
  }
  Reply reply = control.call(message, fds);  // the fd is closed here when `exported` goes
  capnp::FlatArrayMessageReader reader(reply.words, common::untrusted_reader_options());
  auto root = reader.getRoot<control::DaemonMessage>();
  if (root.isError()) {
    *error =
        std::string("plexusd refused the GPU allocation: ") + root.getError().getMessage().cStr();
    return 0;
  }
  if (!root.isGpuMemoryReply() || root.getGpuMemoryReply() == 0) {
    *error = "unexpected reply from plexusd to a GPU registration";
    return 0;
  }
  return root.getGpuMemoryReply();
}

void GpuBuffers::release(ControlChannel& control, uint32_t region) {
  capnp::MallocMessageBuilder message;
  message.initRoot<control::ClientMessage>().setReleaseGpuMemory(region);
  control.call(message);  // an error reply (already released) changes nothing here
}

}  // namespace plexus::client
