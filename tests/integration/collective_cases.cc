// The checked collective calls of the integration tests.
#include "tests/integration/collective_cases.h"

#include <cstring>

#include "shm/dtype.h"
#include "tests/integration/test_data.h"

namespace plexus::test {

std::string Case::describe() const {
  return collective + " " + std::string(shm::dtype_name(dtype)) + " " +
         std::string(shm::redop_name(op)) + " count " + std::to_string(count) +
         (in_place ? " in-place" : " out-of-place") + " root " + std::to_string(root);
}

std::string call_failed(const char* call, plexus_result_t r) {
  return std::string(call) + " returned " + plexus_result_string(r) + ": " +
         plexus_get_last_error();
}

std::string wait_for(plexus_result_t submitted, plexus_request_t* request, const char* call) {
  if (submitted != PLEXUS_SUCCESS) return call_failed(call, submitted);
  plexus_result_t r = plexus_wait(request);
  return r == PLEXUS_SUCCESS ? "" : call_failed("plexus_wait", r);
}

// Runs one case on this rank and checks its output. Returns "" or the failure.
std::string run_case(const Case& c, int rank, int n, plexus_comm_t comm, const Buffers& buf) {
  const size_t elem = shm::dtype_size(c.dtype);
  const size_t count = c.count;
  const auto un = static_cast<size_t>(n);
  const auto ur = static_cast<size_t>(rank);
  // Sentinels over what the case can touch, so an unwritten element shows.
  std::memset(buf.a, kSentinel, un * count * elem);
  std::memset(buf.b, kSentinel, un * count * elem);
  plexus_request_t req = nullptr;
  std::string error;
  const plexus_dtype_t d = c.dtype;

  if (c.collective == "allreduce") {
    fill_input(buf.a, d, c.op, rank, count);
    void* recv = c.in_place ? buf.a : buf.b;
    error = wait_for(plexus_allreduce(buf.a, recv, count, d, c.op, comm, &req), &req, "allreduce");
    if (error.empty()) {
      error = compare(recv, d, count, [&](size_t j) { return reduced_bits(d, c.op, n, j); });
    }
  } else if (c.collective == "reduce") {
    fill_input(buf.a, d, c.op, rank, count);
    void* recv = c.in_place ? buf.a : buf.b;
    error =
        wait_for(plexus_reduce(buf.a, recv, count, d, c.op, c.root, comm, &req), &req, "reduce");
    if (error.empty() && rank == c.root) {
      error = compare(recv, d, count, [&](size_t j) { return reduced_bits(d, c.op, n, j); });
    }
    if (error.empty() && rank != c.root && !c.in_place) {
      // A non-root's recv buffer is not touched.
      error = compare(buf.b, PLEXUS_UINT8, count * elem, [](size_t) { return kSentinel; });
    }
  } else if (c.collective == "reducescatter") {
    fill_input(buf.a, d, c.op, rank, count * un);
    void* recv = c.in_place ? buf.a + ur * count * elem : buf.b;
    error = wait_for(plexus_reducescatter(buf.a, recv, count, d, c.op, comm, &req), &req,
                     "reducescatter");
    if (error.empty()) {
      error = compare(recv, d, count,
                      [&](size_t j) { return reduced_bits(d, c.op, n, ur * count + j); });
    }
  } else if (c.collective == "broadcast") {
    if (rank == c.root) fill_input(buf.a, d, PLEXUS_SUM, rank, count);
    void* recv = c.in_place ? buf.a : buf.b;
    error =
        wait_for(plexus_broadcast(buf.a, recv, count, d, c.root, comm, &req), &req, "broadcast");
    if (error.empty()) {
      error =
          compare(recv, d, count, [&](size_t j) { return input_bits(d, PLEXUS_SUM, c.root, j); });
    }
  } else if (c.collective == "allgather") {
    std::byte* send = c.in_place ? buf.b + ur * count * elem : buf.a;
    fill_input(send, d, PLEXUS_SUM, rank, count);
    error = wait_for(plexus_allgather(send, buf.b, count, d, comm, &req), &req, "allgather");
    if (error.empty()) {
      error = compare(buf.b, d, count * un, [&](size_t j) {
        return input_bits(d, PLEXUS_SUM, static_cast<int>(j / count), j % count);
      });
    }
  } else if (c.collective == "alltoall") {
    // Rank r's block for rank d holds input(r, d*count + j).
    fill_input(buf.a, d, PLEXUS_SUM, rank, count * un);
    void* recv = c.in_place ? buf.a : buf.b;
    error = wait_for(plexus_alltoall(buf.a, recv, count, d, comm, &req), &req, "alltoall");
    if (error.empty()) {
      error = compare(recv, d, count * un, [&](size_t j) {
        return input_bits(d, PLEXUS_SUM, static_cast<int>(j / count), ur * count + j % count);
      });
    }
  } else if (c.collective == "sendrecv") {
    // A ring: send to the next rank, receive from the previous, batched in a group.
    fill_input(buf.a, d, PLEXUS_SUM, rank, count);
    const int next = (rank + 1) % n;
    const int prev = (rank + n - 1) % n;
    plexus_request_t send_req = nullptr;
    plexus_request_t recv_req = nullptr;
    plexus_group_start();
    plexus_result_t s = plexus_send(buf.a, count, d, next, comm, &send_req);
    plexus_result_t r = plexus_recv(buf.b, count, d, prev, comm, &recv_req);
    plexus_group_end();
    error = wait_for(s, &send_req, "send");
    if (error.empty()) error = wait_for(r, &recv_req, "recv");
    if (error.empty()) {
      error =
          compare(buf.b, d, count, [&](size_t j) { return input_bits(d, PLEXUS_SUM, prev, j); });
    }
  }
  return error.empty() ? "" : c.describe() + ": " + error;
}

}  // namespace plexus::test
