// A thin C++ layer over plexus.h: exceptions instead of codes, RAII for
// communicators, requests and pool buffers.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "plexus/plexus.h"

namespace plexus {

class Error : public std::runtime_error {
 public:
  Error(plexus_result_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  plexus_result_t code() const { return code_; }

 private:
  plexus_result_t code_;
};

inline void check(plexus_result_t result) {
  if (result != PLEXUS_SUCCESS) {
    throw Error(result, std::string(plexus_result_string(result)) + ": " + plexus_get_last_error());
  }
}

inline plexus_unique_id_t new_unique_id() {
  plexus_unique_id_t id;
  check(plexus_get_unique_id(&id));
  return id;
}

// An outstanding op; waits on destruction so no buffer is freed under the daemon.
class Request {
 public:
  Request() = default;
  explicit Request(plexus_request_t request) : request_(request) {}
  Request(Request&& other) noexcept : request_(std::exchange(other.request_, nullptr)) {}
  Request& operator=(Request&& other) noexcept {
    if (this != &other) {
      if (request_ != nullptr) plexus_wait(&request_);
      request_ = std::exchange(other.request_, nullptr);
    }
    return *this;
  }
  ~Request() {
    if (request_ != nullptr) plexus_wait(&request_);
  }
  void wait() {
    if (request_ != nullptr) check(plexus_wait(&request_));
  }
  bool test() {
    if (request_ == nullptr) return true;
    int done = 0;
    check(plexus_test(&request_, &done));
    return done != 0;
  }

 private:
  plexus_request_t request_ = nullptr;
};

class Communicator {
 public:
  Communicator(int nranks, const plexus_unique_id_t& id, int rank) {
    check(plexus_comm_init_rank(&comm_, nranks, id, rank));
  }
  Communicator(Communicator&& other) noexcept : comm_(std::exchange(other.comm_, nullptr)) {}
  Communicator& operator=(Communicator&&) = delete;
  Communicator(const Communicator&) = delete;
  ~Communicator() {
    if (comm_ != nullptr) plexus_comm_destroy(comm_);
  }
  void abort() { check(plexus_comm_abort(std::exchange(comm_, nullptr))); }
  void revoke(const char* reason = nullptr) { check(plexus_comm_revoke(comm_, reason)); }
  // The ranks not in `exclude`, renumbered densely (plexus_comm_shrink).
  Communicator shrink(const std::vector<int>& exclude, int flags = PLEXUS_SHRINK_DEFAULT) {
    plexus_comm_t next = nullptr;
    check(
        plexus_comm_shrink(comm_, exclude.data(), static_cast<int>(exclude.size()), flags, &next));
    return Communicator(next);
  }
  // This communicator grown to `nranks` (plexus_comm_grow); new ranks join with grow_id().
  Communicator grow(int nranks) {
    plexus_comm_t next = nullptr;
    check(plexus_comm_grow(comm_, nranks, &next));
    return Communicator(next);
  }
  plexus_unique_id_t grow_id() const {
    plexus_unique_id_t id;
    check(plexus_comm_grow_id(comm_, &id));
    return id;
  }

  int size() const {
    int n = 0;
    check(plexus_comm_count(comm_, &n));
    return n;
  }
  int rank() const {
    int r = 0;
    check(plexus_comm_user_rank(comm_, &r));
    return r;
  }
  plexus_comm_t get() const { return comm_; }

 private:
  explicit Communicator(plexus_comm_t comm) : comm_(comm) {}

 public:
  Request allreduce(const void* send, void* recv, size_t count, plexus_dtype_t dtype,
                    plexus_redop_t op) {
    plexus_request_t r = nullptr;
    check(plexus_allreduce(send, recv, count, dtype, op, comm_, &r));
    return Request(r);
  }
  Request broadcast(const void* send, void* recv, size_t count, plexus_dtype_t dtype, int root) {
    plexus_request_t r = nullptr;
    check(plexus_broadcast(send, recv, count, dtype, root, comm_, &r));
    return Request(r);
  }
  Request allgather(const void* send, void* recv, size_t count, plexus_dtype_t dtype) {
    plexus_request_t r = nullptr;
    check(plexus_allgather(send, recv, count, dtype, comm_, &r));
    return Request(r);
  }

 private:
  plexus_comm_t comm_ = nullptr;
};

// Pool memory for zero-copy collectives.
class PoolBuffer {
 public:
  explicit PoolBuffer(size_t bytes) { check(plexus_alloc(&data_, bytes)); }
  PoolBuffer(PoolBuffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
  PoolBuffer& operator=(PoolBuffer&&) = delete;
  PoolBuffer(const PoolBuffer&) = delete;
  ~PoolBuffer() { plexus_free(data_); }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
};

}  // namespace plexus
