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
  // GPU buffers: what the call gets for a mirror pointer, and the copies around the call.
  const size_t span = un * count * elem;
  auto at = [&](std::byte* p) -> std::byte* {
    if (buf.device_a == nullptr) return p;
    if (p >= buf.a && p < buf.a + span) return buf.device_a + (p - buf.a);
    return buf.device_b + (p - buf.b);
  };
  auto mirror = [&](bool to_device) -> std::string {
    if (buf.device_a == nullptr) return {};
    std::string e = to_device ? buf.copy(buf.device_a, buf.a, span, true)
                              : buf.copy(buf.a, buf.device_a, span, false);
    if (e.empty()) {
      e = to_device ? buf.copy(buf.device_b, buf.b, span, true)
                    : buf.copy(buf.b, buf.device_b, span, false);
    }
    return e;
  };
  // Runs `call` on the device copies; its result as wait_for gives it.
  auto on_device = [&](auto&& call) -> std::string {
    if (std::string e = mirror(true); !e.empty()) return "to the device: " + e;
    std::string e = call();
    if (e.empty()) e = mirror(false);
    return e;
  };

  if (c.collective == "allreduce") {
    fill_input(buf.a, d, c.op, rank, count);
    std::byte* recv = c.in_place ? buf.a : buf.b;
    error = on_device([&] {
      return wait_for(plexus_allreduce(at(buf.a), at(recv), count, d, c.op, comm, &req), &req,
                      "allreduce");
    });
    if (error.empty()) {
      error = compare(recv, d, count, [&](size_t j) { return reduced_bits(d, c.op, n, j); });
    }
  } else if (c.collective == "reduce") {
    fill_input(buf.a, d, c.op, rank, count);
    std::byte* recv = c.in_place ? buf.a : buf.b;
    error = on_device([&] {
      return wait_for(plexus_reduce(at(buf.a), at(recv), count, d, c.op, c.root, comm, &req), &req,
                      "reduce");
    });
    if (error.empty() && rank == c.root) {
      error = compare(recv, d, count, [&](size_t j) { return reduced_bits(d, c.op, n, j); });
    }
    if (error.empty() && rank != c.root && !c.in_place) {
      // A non-root's recv buffer is not touched.
      error = compare(buf.b, PLEXUS_UINT8, count * elem, [](size_t) { return kSentinel; });
    }
  } else if (c.collective == "reducescatter") {
    fill_input(buf.a, d, c.op, rank, count * un);
    std::byte* recv = c.in_place ? buf.a + ur * count * elem : buf.b;
    error = on_device([&] {
      return wait_for(plexus_reducescatter(at(buf.a), at(recv), count, d, c.op, comm, &req), &req,
                      "reducescatter");
    });
    if (error.empty()) {
      error = compare(recv, d, count,
                      [&](size_t j) { return reduced_bits(d, c.op, n, ur * count + j); });
    }
  } else if (c.collective == "broadcast") {
    if (rank == c.root) fill_input(buf.a, d, PLEXUS_SUM, rank, count);
    std::byte* recv = c.in_place ? buf.a : buf.b;
    error = on_device([&] {
      return wait_for(plexus_broadcast(at(buf.a), at(recv), count, d, c.root, comm, &req), &req,
                      "broadcast");
    });
    if (error.empty()) {
      error =
          compare(recv, d, count, [&](size_t j) { return input_bits(d, PLEXUS_SUM, c.root, j); });
    }
  } else if (c.collective == "allgather") {
    std::byte* send = c.in_place ? buf.b + ur * count * elem : buf.a;
    fill_input(send, d, PLEXUS_SUM, rank, count);
    error = on_device([&] {
      return wait_for(plexus_allgather(at(send), at(buf.b), count, d, comm, &req), &req,
                      "allgather");
    });
    if (error.empty()) {
      error = compare(buf.b, d, count * un, [&](size_t j) {
        return input_bits(d, PLEXUS_SUM, static_cast<int>(j / count), j % count);
      });
    }
  } else if (c.collective == "alltoall") {
    // Rank r's block for rank d holds input(r, d*count + j).
    fill_input(buf.a, d, PLEXUS_SUM, rank, count * un);
    std::byte* recv = c.in_place ? buf.a : buf.b;
    error = on_device([&] {
      return wait_for(plexus_alltoall(at(buf.a), at(recv), count, d, comm, &req), &req, "alltoall");
    });
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
    error = on_device([&] {
      plexus_request_t send_req = nullptr;
      plexus_request_t recv_req = nullptr;
      plexus_group_start();
      plexus_result_t s = plexus_send(at(buf.a), count, d, next, comm, &send_req);
      plexus_result_t r = plexus_recv(at(buf.b), count, d, prev, comm, &recv_req);
      plexus_group_end();
      std::string e = wait_for(s, &send_req, "send");
      std::string e2 = wait_for(r, &recv_req, "recv");
      return e.empty() ? e2 : e;
    });
    if (error.empty()) {
      error =
          compare(buf.b, d, count, [&](size_t j) { return input_bits(d, PLEXUS_SUM, prev, j); });
    }
  }
  return error.empty() ? "" : c.describe() + ": " + error;
}

}  // namespace plexus::test
