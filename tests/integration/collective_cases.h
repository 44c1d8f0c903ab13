// One collective call checked exactly: what each rank passes and what it must get back.
// Shared by the single-node and multi-node integration tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "plexus/plexus.h"

namespace plexus::test {

inline constexpr uint8_t kSentinel = 0x5a;

struct Case {
  std::string
      collective;  // allreduce, reduce, reducescatter, broadcast, allgather, alltoall, sendrecv
  plexus_dtype_t dtype;
  plexus_redop_t op;
  size_t count;
  bool in_place;
  int root;

  std::string describe() const;
};

// Buffers for one rank: from the pool (zero copy) or from the heap (staged); or GPU
// buffers, with a and b their host mirrors: a case fills and checks the mirrors, copies
// them to the device before its call, passes the device addresses, and copies back after.
struct Buffers {
  std::byte* a = nullptr;  // send (or the in-place buffer)
  std::byte* b = nullptr;  // recv
  std::byte* device_a = nullptr;
  std::byte* device_b = nullptr;
  // Copies `bytes` between host and device memory (to_device: host -> device); "" or why not.
  std::function<std::string(std::byte* dst, const std::byte* src, size_t bytes, bool to_device)>
      copy;
};

std::string call_failed(const char* call, plexus_result_t r);
std::string wait_for(plexus_result_t submitted, plexus_request_t* request, const char* call);

// Runs one case on this rank (buffers hold nranks * count elements) and checks its output.
// Returns "" or the failure.
std::string run_case(const Case& c, int rank, int n, plexus_comm_t comm, const Buffers& buf);

}  // namespace plexus::test
