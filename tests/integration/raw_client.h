// A client that speaks the protocol by hand, for hostile tests: it can send any frame,
// any descriptor, and write anything into its rings, bypassing libplexus's checks.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "clientlib/control/control_channel.h"
#include "shm/gpu_export.h"
#include "shm/pool.h"
#include "shm/ring.h"

namespace plexus::test {

// Where a multi-node communicator forms: a daemon's instance id and peer addresses (what
// a unique id made by that daemon holds); empty: this node only.
struct RootDaemon {
  uint64_t instance = 0;
  std::vector<std::string> addresses;
};

class RawClient {
 public:
  explicit RawClient(const std::string& socket_path);

  // The job its rank hello names (else the daemon takes the process name, "raw-client").
  void set_job(std::string job) { job_ = std::move(job); }
  // Hello as a rank with a proper sealed pool of pool_bytes; then rings are attached.
  void hello_with_pool(size_t pool_bytes);
  // Hello carrying an arbitrary fd and declared size; returns the daemon's reply
  // (error text, or "" when accepted).
  std::string hello_with_fd(int fd, uint64_t declared_bytes);
  // Joins a communicator; returns its handle or throws with the daemon's error.
  uint32_t comm_init(const uint8_t (&token)[16], uint32_t nranks, uint32_t rank,
                     uint32_t timeout_ms, const RootDaemon& root = RootDaemon{});
  // This client's daemon as a root (an admin hello on a connection of its own).
  static RootDaemon root_of(const std::string& socket_path);
  // Hello as plexusctl does (no pool, no rings).
  void hello_admin();
  // A status request as this session (after a hello); returns the daemon's counters.
  struct Counters {
    uint64_t bad_entries = 0;
    uint64_t bad_messages = 0;
  };
  Counters status();

  // registerGpuMemory with these fields (handle_type: GpuHandleType's number) and `fds`
  // with it: "region N", or the daemon's error message.
  std::string register_gpu_memory(std::span<const uint8_t> ipc_handle,
                                  std::span<const uint8_t> device_uuid, uint64_t bytes,
                                  uint16_t handle_type = 0, std::span<const int> fds = {});
  // registerGpuMemory of a test device's export (tests/unit/host_device_memory.h): its region
  // id, or 0 with the test failed naming the daemon's reply.
  uint32_t register_export(const shm::GpuExport& e);
  // releaseGpuMemory: "released", or the daemon's error message.
  std::string release_gpu_memory(uint32_t region);

  // Throws if the SQ stays full for a second (the daemon holding this client back).
  void submit(const shm::SubmissionEntry& entry);
  // Waits up to timeout_ms for one completion.
  std::optional<shm::CompletionEntry> next_completion(int timeout_ms);
  // True when the daemon closed this connection within timeout_ms.
  bool closed_by_daemon(int timeout_ms);

  shm::RingHeader* ring_header() { return rings_->header(); }
  shm::ClientPool& pool() { return *pool_; }
  int socket_fd() { return channel_->fd(); }
  client::ControlChannel& channel() { return *channel_; }

 private:
  std::unique_ptr<client::ControlChannel> channel_;
  std::unique_ptr<shm::ClientPool> pool_;
  std::optional<shm::RingMemory> rings_;
  std::optional<shm::ClientRingEnd> ring_end_;
  common::UniqueFd submission_eventfd_;
  common::UniqueFd completion_eventfd_;
  std::string job_;
};

// Sends raw bytes (and optional fds) on a fresh connection and reports whether the
// daemon then closed it within timeout_ms.
bool daemon_closes_after(const std::string& socket_path, const std::string& bytes, int timeout_ms,
                         std::span<const int> fds = {});

}  // namespace plexus::test
