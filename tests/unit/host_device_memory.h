// A DeviceMemory over host memory, for testing the daemon's GPU path where there is no
// GPU: "allocations" are host blocks named by an id in the handle's first 8 bytes; it
// counts what was opened and closed, and can be told to fail a copy or to finish one
// only after being polled a while.
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/gpu/device_memory.h"
#include "daemon/local/reduce.h"
#include "shm/dtype.h"

namespace plexus::test {

// A poll's answer (CopyInFlight::done and the like), as a test compares it: "true",
// "false", or the failure's sentence.
inline std::string outcome(const common::Result<bool>& polled) {
  if (!polled.ok()) return polled.error();
  return *polled ? "true" : "false";
}

class HostDeviceMemory final : public daemon::gpu::DeviceMemory {
 public:
  // A new "device allocation" of `bytes` and its export.
  shm::GpuExport allocate(uint64_t bytes) {
    const uint64_t id = next_id_++;
    blocks_[id].assign(bytes, std::byte{0});
    shm::GpuExport e;
    std::memcpy(e.ipc_handle.data(), &id, sizeof(id));
    e.bytes = bytes;
    return e;
  }
  std::vector<std::byte>& block(const shm::GpuExport& e) { return blocks_[id_of(e)]; }

  common::Result<std::shared_ptr<daemon::gpu::DeviceMapping>> open(
      const shm::GpuExport& e) override {
    auto it = blocks_.find(id_of(e));
    if (it == blocks_.end()) return common::fail("no such allocation");
    if (e.bytes > it->second.size()) {
      return common::fail("the handle maps " + std::to_string(it->second.size()) + " bytes");
    }
    ++opened;
    return std::shared_ptr<daemon::gpu::DeviceMapping>(
        std::make_shared<Mapping>(this, it->second.data(), e.bytes));
  }
  common::Result<daemon::gpu::HostBuffer> allocate_host(uint64_t bytes) override {
    ++host_buffers;
    return daemon::gpu::HostBuffer(new std::byte[bytes > 0 ? bytes : 1],
                                   daemon::gpu::HostBufferDeleter{shared_from_this(), bytes});
  }
  std::unique_ptr<daemon::gpu::CopyInFlight> start_to_host(std::byte* host,
                                                           const daemon::gpu::DeviceMapping& m,
                                                           uint64_t offset,
                                                           uint64_t bytes) override {
    auto copy = start(host, address(m) + offset, bytes);
    copy->held_until_allowed = copies_to_host++;
    return copy;
  }
  std::unique_ptr<daemon::gpu::CopyInFlight> start_to_device(const daemon::gpu::DeviceMapping& m,
                                                             uint64_t offset, const std::byte* host,
                                                             uint64_t bytes) override {
    ++copies_to_device;
    return start(address(m) + offset, host, bytes);
  }
  std::unique_ptr<daemon::gpu::CopyInFlight> start_device_to_device(
      const daemon::gpu::DeviceMapping& to, uint64_t to_offset,
      const daemon::gpu::DeviceMapping& from, uint64_t from_offset, uint64_t bytes) override {
    ++copies_device_to_device;
    return start(address(to) + to_offset, address(from) + from_offset, bytes);
  }
  // From the weight store's copier thread: moves the bytes at once (it waits for them).
  std::string copy_aside(Toward toward, std::byte* host, const daemon::gpu::DeviceMapping& m,
                         uint64_t offset, uint64_t bytes) override {
    ++copies_aside;
    if (fail_copies) return "copy failed (test)";
    std::byte* device = address(m) + offset;
    if (toward == Toward::kHost) {
      std::memmove(host, device, bytes);
    } else {
      std::memmove(device, host, bytes);
    }
    return {};
  }
  void prefer_urgent_copies(bool urgent) override { urgent_ = urgent; }
  std::string reduce_kernel_unavailable() const override {
    return has_kernel ? "" : "no reduction kernel (test)";
  }
  // The kernel's work on the host, when polled as long as a copy: reduce_arrays.
  common::Result<std::unique_ptr<daemon::gpu::CopyInFlight>> start_reduce(
      const daemon::gpu::DeviceReduction& r, const std::vector<daemon::gpu::DeviceSpan>& inputs,
      const std::vector<daemon::gpu::DeviceSpan>& outputs) override {
    if (!has_kernel) return common::fail(reduce_kernel_unavailable());
    if (refuse_reduce) return common::fail("GPU 1 cannot reach GPU 0's memory (test)");
    ++reductions;
    std::vector<const void*> in;
    for (const auto& span : inputs) in.push_back(address(*span.mapping) + span.offset);
    std::vector<std::byte*> out;
    for (const auto& span : outputs) out.push_back(address(*span.mapping) + span.offset);
    return std::unique_ptr<daemon::gpu::CopyInFlight>(std::make_unique<Copy>(this, [r, in, out] {
      std::vector<std::byte> result(r.count * shm::dtype_size(r.dtype));
      daemon::reduce_arrays(r.dtype, r.op, in.data(), static_cast<int>(in.size()), result.data(),
                            r.count, r.avg_divisor);
      for (std::byte* o : out) std::memcpy(o, result.data(), result.size());
    }));
  }
  std::string describe() const override { return "host (test)"; }

  // Atomic: a test reads them while a daemon's engine thread uses this device.
  std::atomic<int> opened{0};
  std::atomic<int> closed{0};
  std::atomic<int> host_buffers{0};
  std::atomic<int> host_buffers_freed{0};
  std::atomic<int> copies_to_host{0};
  std::atomic<int> urgent_copies{0};  // started while prefer_urgent_copies(true)
  std::atomic<int> copies_to_device{0};
  std::atomic<int> copies_device_to_device{0};
  std::atomic<int> copies_aside{0};
  std::atomic<bool> fail_copies{false};  // copies and reductions alike
  // start_reduce: whether it runs at all, whether it refuses (as a GPU that cannot reach
  // another's memory), how many ran.
  std::atomic<bool> has_kernel{false};
  std::atomic<bool> refuse_reduce{false};
  std::atomic<int> reductions{0};
  // A copy moves its bytes only when polled this many times (or waited for): as a copy
  // engine does, later than the call that started it.
  std::atomic<int> polls_per_copy{0};
  std::atomic<int> copies_running{0};
  // Copies to the host numbered this or later (from 0, in the order started) do not end
  // by polling until the test raises it: a copy engine still at an op's later pieces.
  std::atomic<int> to_host_allowed{std::numeric_limits<int>::max()};

 protected:
  void free_host(std::byte* p, uint64_t) override {
    ++host_buffers_freed;
    delete[] p;
  }

 private:
  // Moves the bytes when it ends, so reading them early shows up in the result.
  class Copy final : public daemon::gpu::CopyInFlight {
   public:
    Copy(HostDeviceMemory* owner, std::function<void()> move)
        : owner_(owner), move_(std::move(move)), polls_left_(owner->polls_per_copy) {
      ++owner_->copies_running;
    }
    ~Copy() override { wait(); }
    int held_until_allowed = -1;  // a copy to the host: its number (to_host_allowed)
    common::Result<bool> done() override {
      if (held_until_allowed >= owner_->to_host_allowed) return false;
      if (polls_left_ > 0) {
        --polls_left_;
        return false;
      }
      if (std::string error = wait(); !error.empty()) return common::fail(std::move(error));
      return true;
    }
    std::string wait() override {
      if (!finished_) {
        finished_ = true;
        --owner_->copies_running;
        if (owner_->fail_copies) {
          error_ = "copy failed (test)";
        } else {
          move_();
        }
      }
      return error_;
    }

   private:
    HostDeviceMemory* owner_;
    std::function<void()> move_;
    int polls_left_;
    bool finished_ = false;
    std::string error_;
  };
  bool urgent_ = false;  // the engine thread's
  std::unique_ptr<Copy> start(std::byte* to, const std::byte* from, uint64_t bytes) {
    if (urgent_) ++urgent_copies;
    return std::make_unique<Copy>(this, [to, from, bytes] { std::memmove(to, from, bytes); });
  }

  class Mapping final : public daemon::gpu::DeviceMapping {
   public:
    Mapping(HostDeviceMemory* owner, std::byte* at, uint64_t bytes)
        : DeviceMapping(reinterpret_cast<uint64_t>(at), bytes), owner_(owner) {}
    ~Mapping() override { ++owner_->closed; }

   private:
    HostDeviceMemory* owner_;
  };
  static uint64_t id_of(const shm::GpuExport& e) {
    uint64_t id;
    std::memcpy(&id, e.ipc_handle.data(), sizeof(id));
    return id;
  }
  static std::byte* address(const daemon::gpu::DeviceMapping& m) {
    return reinterpret_cast<std::byte*>(m.device_address());
  }
  std::map<uint64_t, std::vector<std::byte>> blocks_;
  uint64_t next_id_ = 1;
};

}  // namespace plexus::test
