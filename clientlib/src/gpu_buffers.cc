#include "clientlib/src/gpu_buffers.h"

#include <capnp/serialize.h>

#include <vector>

#include "clientlib/src/gpu_pointer.h"
#include "shm/framing.h"

namespace plexus::client {

namespace control = shm::control;

common::Result<std::optional<GpuSpan>> GpuBuffers::locate(ControlChannel& control, const void* ptr,
                                                          uint64_t bytes) {
  common::Result<std::optional<GpuPointer>> pointer = query_gpu_pointer(ptr);
  if (!pointer) return common::fail(pointer.error());
  if (!*pointer) return {std::nullopt};
  const GpuAllocation& a = (*pointer)->allocation;
  const auto address = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr));
  const uint64_t offset = address - a.base;
  if (offset > a.bytes || bytes > a.bytes - offset) {
    return common::fail(std::to_string(bytes) + " bytes at offset " + std::to_string(offset) +
                        " run past the end of its " + std::to_string(a.bytes) +
                        "-byte GPU allocation");
  }
  std::lock_guard lock(mutex_);
  uint32_t region = cache_.find(a);
  if (region == 0) {
    const common::Result<uint32_t> registered = register_allocation(control, a);
    if (!registered) return common::fail(registered.error());
    region = *registered;
    for (uint32_t stale : cache_.insert(a, region)) release(control, stale);
  }
  return std::optional(GpuSpan{region, offset});
}

bool GpuBuffers::forget(ControlChannel& control, const void* ptr) {
  std::lock_guard lock(mutex_);
  const uint32_t region =
      cache_.erase_containing(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr)));
  if (region == 0) return false;
  release(control, region);
  return true;
}

common::Result<uint32_t> GpuBuffers::register_allocation(ControlChannel& control,
                                                         const GpuAllocation& allocation) {
  common::Result<shm::GpuExport> exported_or = export_gpu_allocation(allocation);
  if (!exported_or) return common::fail(exported_or.error());
  const shm::GpuExport exported = exported_or.take();
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
    return common::fail(std::string("plexusd refused the GPU allocation: ") +
                        root.getError().getMessage().cStr());
  }
  if (!root.isGpuMemoryReply() || root.getGpuMemoryReply() == 0) {
    return common::fail("unexpected reply from plexusd to a GPU registration");
  }
  return root.getGpuMemoryReply();
}

void GpuBuffers::release(ControlChannel& control, uint32_t region) {
  capnp::MallocMessageBuilder message;
  message.initRoot<control::ClientMessage>().setReleaseGpuMemory(region);
  control.call(message);  // an error reply (already released) changes nothing here
}

}  // namespace plexus::client
