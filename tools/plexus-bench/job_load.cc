// One rank of a job that loads the links for the multi-job scheduling tests and benchmarks
// (tests/cluster/job_share_test.sh through tools/bench/job_share.sh): allreduces of --bytes, back
// to back (--depth of them in flight, so that the job's queue does not run dry between
// ops) or one every --interval-ms (at multiples of it on CLOCK_REALTIME, so every rank
// submits at the same moment and an op's time is not its wait for a late peer), until rank
// 0 has run --seconds; then every rank stops after the same op (rank 0 writes which into
// --id-file's ".stop" beside it, before it submits the next). Each op's result is checked exactly.
// Writes one line per op to --out: "start_ns end_ns" (CLOCK_REALTIME, comparable across the
// cluster's namespaces). The job is PLEXUS_JOB, as for any client.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "plexus/plexus.h"
#include "tools/plexus-bench/atomic_file.h"
#include "tools/plexus-bench/self_timeout.h"
#include "tools/plexus-bench/unique_id_file.h"

namespace {

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

int fail(const char* what) {
  std::fprintf(stderr, "job_load: %s: %s\n", what, plexus_get_last_error());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int nranks = 2, rank = -1;
  std::string id_file, out_file;
  uint64_t bytes = 64 << 10;
  double seconds = 10, interval_ms = 0;
  int depth = 1;  // ops in flight at once
  // Flags as --name value (a plain parser: this is a test tool, see the header comment).
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--nranks") {
      nranks = std::atoi(value);
    } else if (flag == "--rank") {
      rank = std::atoi(value);
    } else if (flag == "--id-file") {
      id_file = value;
    } else if (flag == "--out") {
      out_file = value;
    } else if (flag == "--bytes") {
      bytes = std::strtoull(value, nullptr, 10);
    } else if (flag == "--seconds") {
      seconds = std::atof(value);
    } else if (flag == "--depth") {
      depth = std::atoi(value);
    } else if (flag == "--interval-ms") {
      interval_ms = std::atof(value);
    } else {
      std::fprintf(stderr, "job_load: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (rank < 0 || rank >= nranks || id_file.empty() || out_file.empty() || bytes < 4 || depth < 1) {
    std::fprintf(stderr,
                 "usage: job_load --rank R --id-file F --out F [--nranks 2] [--bytes N] "
                 "[--seconds S] [--interval-ms MS] [--depth OPS]\n");
    return 2;
  }

  // A peer that never comes, or a stop it never sees, must not hold the script forever.
  plexus::bench::arm_self_timeout("job_load: rank " + std::to_string(rank) +
                                      ": timed out: the run took longer than --seconds + 120 s",
                                  static_cast<unsigned>(seconds) + 120);
  plexus_unique_id_t id{};
  if (rank == 0) {
    if (plexus_get_unique_id(&id) != PLEXUS_SUCCESS) return fail("unique id");
    std::remove((id_file + ".stop").c_str());
    plexus::bench::publish_unique_id(id_file, id);
  } else {
    try {
      id = plexus::bench::wait_for_unique_id(id_file, std::chrono::seconds(60));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "job_load: %s\n", e.what());
      return 1;
    }
  }
  plexus_comm_t comm = nullptr;
  if (plexus_comm_init_rank(&comm, nranks, id, rank) != PLEXUS_SUCCESS) return fail("comm init");
  const size_t count = bytes / sizeof(float);
  // One buffer per op in flight; ops are submitted in order, so buffer op % depth is free
  // again once op - depth has been waited for.
  std::vector<float*> buffers(static_cast<size_t>(depth), nullptr);
  for (float*& buffer : buffers) {
    if (plexus_alloc(reinterpret_cast<void**>(&buffer), count * sizeof(float)) != PLEXUS_SUCCESS) {
      return fail("alloc");
    }
  }
  std::vector<plexus_request_t> requests(static_cast<size_t>(depth), nullptr);
  std::vector<std::pair<int64_t, int64_t>> times;
  // Waits for op, checks its result exactly and records its times.
  auto finish = [&](int64_t op) -> bool {
    const size_t slot = static_cast<size_t>(op % depth);
    if (plexus_wait(&requests[slot]) != PLEXUS_SUCCESS) {
      fail("allreduce");
      return false;
    }
    times[static_cast<size_t>(op)].second = now_ns();
    const float want =
        static_cast<float>(nranks * (op % 64 + 1)) + static_cast<float>(nranks * (nranks - 1) / 2);
    const float* buffer = buffers[slot];
    for (size_t i = 0; i < count; ++i) {
      if (buffer[i] != want) {
        std::fprintf(stderr, "job_load: rank %d op %lld element %zu is %g, want %g\n", rank,
                     static_cast<long long>(op), i, static_cast<double>(buffer[i]),
                     static_cast<double>(want));
        return false;
      }
    }
    return true;
  };
  const int64_t begin = now_ns();
  const int64_t interval_ns = static_cast<int64_t>(interval_ms * 1e6);
  int64_t next_start = interval_ns > 0 ? (begin / interval_ns + 1) * interval_ns : 0;
  int64_t stop_at = -1;
  int64_t op = 0;
  for (;; ++op) {
    if (op >= depth && !finish(op - depth)) return 1;
    // Rank 0 writes the stop before it submits op stop_at - depth; this rank has just seen
    // op - depth complete, so by op == stop_at the file is there to read.
    if (stop_at < 0 && rank != 0) {
      std::ifstream stop(id_file + ".stop");  // replaced whole by rank 0: all or nothing
      int64_t at = -1;
      if (stop >> at) stop_at = at;
    }
    if (stop_at >= 0 && op >= stop_at) break;
    // Each rank adds op + rank + 1: the sum is known exactly (small integers in float).
    const float mine = static_cast<float>(op % 64 + rank + 1);
    float* buffer = buffers[static_cast<size_t>(op % depth)];
    for (size_t i = 0; i < count; ++i) buffer[i] = mine;
    if (interval_ns > 0) {
      // Skips grid points already past (a slow op), so the ranks stay on the same ones.
      while (next_start < now_ns()) next_start += interval_ns;
      const timespec at{static_cast<time_t>(next_start / 1000000000), next_start % 1000000000};
      while (::clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, nullptr) == EINTR) {
      }
      next_start += interval_ns;
    }
    times.emplace_back(now_ns(), 0);
    if (plexus_allreduce(buffer, buffer, count, PLEXUS_FLOAT32, PLEXUS_SUM, comm,
                         &requests[static_cast<size_t>(op % depth)]) != PLEXUS_SUCCESS) {
      return fail("allreduce");
    }
    // A rank submits op k only once every rank's op k - depth is done, so no rank has
    // submitted past op + depth yet: op + depth + 1 is the first that none will.
    if (stop_at < 0 && rank == 0 && static_cast<double>(now_ns() - begin) >= seconds * 1e9) {
      stop_at = op + depth + 1;
      plexus::bench::write_file_atomically(id_file + ".stop", std::to_string(stop_at));
    }
  }
  // The loop ended at op == stop_at, having finished op - depth already.
  for (int64_t done = std::max<int64_t>(0, op - depth + 1); done < op; ++done) {
    if (!finish(done)) return 1;
  }
  std::ofstream out(out_file);
  for (auto [s, e] : times) out << s << ' ' << e << '\n';
  plexus_comm_destroy(comm);
  return 0;
}
