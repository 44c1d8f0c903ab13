// How should an allreduce reach buffers that live in a rank's own memory (a torch CPU
// tensor) rather than in its Plexus pool? The two candidates are measured side by side
// before choosing one (docs/BENCHMARKS.md, "Staging against process_vm_readv/writev"), and
// this is that measurement, free of everything else the daemon does:
//   pool   the buffers already lie in shared memory: the reducer reads every input and
//          writes every output in place (the floor: what pool tensors get);
//   stage  each rank copies its tensor into shared memory, the reducer reduces there, and
//          each rank copies the result back (what libplexus does for a foreign pointer);
//   pvm    the reducer reads each rank's tensor with process_vm_readv into a small bounce
//          buffer per chunk, reduces in cache, and writes the chunk back into every rank
//          with process_vm_writev: two memory passes fewer than stage, at the price of a
//          page pin per page and two system calls per rank per chunk.
// Ranks are forked processes; the reducer is the parent with --threads threads (the
// daemon's worker pool). Sum of float32, in place, as torch's allreduce does it.
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

// CLI11's string splitting trips GCC 12's -Wnull-dereference (a false positive inside
// libstdc++), as in the other benchmarks.
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <CLI/CLI.hpp>

#include "daemon/local/reduce.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Rank {
  pid_t pid = 0;
  int to = -1;              // parent -> rank commands
  int from = -1;            // rank -> parent replies
  float* tensor = nullptr;  // address in the rank's own memory
  float* slot = nullptr;    // its shared slot, mapped in both
};

// A command to a rank and the element count it applies to.
struct Command {
  char op;  // 'r' reset, 'i' copy in, 'o' copy out, 'c' check
  size_t count;
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "host_path_bench: %s: %s%s\n", what, std::strerror(errno),
               errno == EPERM ? " (process_vm_* needs ptrace rights over the ranks: "
                                "kernel.yama.ptrace_scope, or a seccomp profile)"
                              : "");
  std::exit(1);
}

char command(const Rank& r, Command c) {
  if (write(r.to, &c, sizeof c) != sizeof c) die("write to a rank");
  char reply = 0;
  if (read(r.from, &reply, 1) != 1) die("read from a rank");
  return reply;
}

// Child body: waits for commands, copies between its tensor and its slot.
[[noreturn]] void rank_main(int in, int out, float* slot, size_t max_count, int rank) {
  std::vector<float> tensor(max_count, static_cast<float>(rank + 1));
  float* address = tensor.data();
  if (write(out, &address, sizeof address) != sizeof address) _exit(1);
  for (;;) {
    Command c{};
    if (read(in, &c, sizeof c) != sizeof c) _exit(0);
    const size_t n = std::min(c.count, max_count);
    char reply = c.op;
    if (c.op == 'i') std::memcpy(slot, tensor.data(), n * sizeof(float));
    if (c.op == 'o') std::memcpy(tensor.data(), slot, n * sizeof(float));
    if (c.op == 'r') std::fill_n(tensor.begin(), n, static_cast<float>(rank + 1));
    if (c.op == 'c') {  // every element holds the same value: its digit, or 'x'
      const float want = tensor[0];
      reply = std::all_of(tensor.begin(), tensor.begin() + static_cast<ptrdiff_t>(n),
                          [&](float v) { return v == want; })
                  ? static_cast<char>('0' + static_cast<int>(want))
                  : 'x';
    }
    if (write(out, &reply, 1) != 1) _exit(1);
  }
}

template <typename F>
void on_threads(int threads, size_t chunks, F&& body) {
  std::atomic<size_t> next{0};
  auto work = [&](int thread) {
    for (size_t c = next++; c < chunks; c = next++) body(c, thread);
  };
  std::vector<std::thread> helpers;
  for (int t = 1; t < threads; ++t) helpers.emplace_back(work, t);
  work(0);
  for (auto& h : helpers) h.join();
}

void reduce_in_place(std::vector<Rank>& ranks, size_t count, size_t chunk_elems, int threads) {
  const size_t chunks = (count + chunk_elems - 1) / chunk_elems;
  on_threads(threads, chunks, [&](size_t c, int) {
    const size_t begin = c * chunk_elems;
    const size_t n = std::min(chunk_elems, count - begin);
    constexpr size_t kTile = 4096;  // elements: 16 KiB, stays in L1/L2
    std::vector<const void*> in(ranks.size());
    for (size_t t = begin; t < begin + n; t += kTile) {
      const size_t m = std::min(kTile, begin + n - t);
      for (size_t r = 0; r < ranks.size(); ++r) in[r] = ranks[r].slot + t;
      plexus::daemon::reduce_arrays(PLEXUS_FLOAT32, PLEXUS_SUM, in.data(),
                                    static_cast<int>(ranks.size()), ranks[0].slot + t, m, 1);
      for (size_t r = 1; r < ranks.size(); ++r)
        std::memcpy(ranks[r].slot + t, ranks[0].slot + t, m * sizeof(float));
    }
  });
}

// bounces: one per thread, k chunks each, allocated (and faulted in) once, as a daemon
// thread's would be.
void reduce_remote(std::vector<Rank>& ranks, size_t count, size_t chunk_elems, int threads,
                   std::vector<std::vector<float>>& bounces) {
  const size_t chunks = (count + chunk_elems - 1) / chunk_elems;
  on_threads(threads, chunks, [&](size_t c, int thread) {
    std::vector<float>& bounce = bounces[static_cast<size_t>(thread)];
    const size_t k = ranks.size();
    const size_t begin = c * chunk_elems;
    const size_t n = std::min(chunk_elems, count - begin);
    std::vector<const void*> in(k);
    for (size_t r = 0; r < k; ++r) {
      iovec local{bounce.data() + r * chunk_elems, n * sizeof(float)};
      iovec remote{ranks[r].tensor + begin, n * sizeof(float)};
      if (process_vm_readv(ranks[r].pid, &local, 1, &remote, 1, 0) !=
          static_cast<ssize_t>(n * sizeof(float)))
        die("process_vm_readv");
      in[r] = bounce.data() + r * chunk_elems;
    }
    plexus::daemon::reduce_arrays(PLEXUS_FLOAT32, PLEXUS_SUM, in.data(), static_cast<int>(k),
                                  bounce.data(), n, 1);
    for (size_t r = 0; r < k; ++r) {
      iovec local{bounce.data(), n * sizeof(float)};
      iovec remote{ranks[r].tensor + begin, n * sizeof(float)};
      if (process_vm_writev(ranks[r].pid, &local, 1, &remote, 1, 0) !=
          static_cast<ssize_t>(n * sizeof(float)))
        die("process_vm_writev");
    }
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Allreduce of buffers in the ranks' own memory: shared pool, staged through it, "
      "or read and written by the reducer with process_vm_readv/writev"};
  int nranks = 4;
  int threads = 2;
  int iters = 30;
  std::vector<size_t> sizes_mib{1, 4, 16, 64};
  size_t chunk_kib = 128;
  app.add_option("--ranks", nranks, "rank processes")
      ->check(CLI::Range(2, 16));  // the check's sum 1+..+n, as a char: distinct up to 16
  app.add_option("--threads", threads, "reducer threads")->check(CLI::Range(1, 64));
  app.add_option("--iters", iters, "timed iterations per size (median reported)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--sizes-mib", sizes_mib, "buffer sizes in MiB, comma-separated")->delimiter(',');
  app.add_option("--chunk-kib", chunk_kib, "pvm: bytes read per rank per chunk")
      ->check(CLI::Range(4, 65536));
  CLI11_PARSE(app, argc, argv);

  const size_t max_count = *std::max_element(sizes_mib.begin(), sizes_mib.end()) << 18;
  std::printf(
      "# host_path_bench: %d ranks, %d reducer threads, float32 sum in place, "
      "median of %d\n",
      nranks, threads, iters);
  std::printf("# %8s %12s %12s %12s %10s %10s\n", "MiB", "pool GB/s", "stage GB/s", "pvm GB/s",
              "pvm/stage", "pvm/pool");
  std::vector<Rank> ranks(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    void* slot = mmap(nullptr, max_count * sizeof(float), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (slot == MAP_FAILED) die("mmap of a rank's shared slot");
    int to[2], from[2];
    if (pipe(to) != 0 || pipe(from) != 0) die("pipe");
    const pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
      close(to[1]);
      close(from[0]);
      rank_main(to[0], from[1], static_cast<float*>(slot), max_count, r);
    }
    close(to[0]);
    close(from[1]);
    Rank& rk = ranks[static_cast<size_t>(r)];
    rk = Rank{pid, to[1], from[0], nullptr, static_cast<float*>(slot)};
    if (read(rk.from, &rk.tensor, sizeof rk.tensor) != sizeof rk.tensor) die("read from a rank");
  }
  // Commands go to every rank before any reply is read, so the ranks copy in parallel.
  auto all_parallel = [&](char op, size_t count) {
    const Command c{op, count};
    for (auto& r : ranks)
      if (write(r.to, &c, sizeof c) != sizeof c) die("write to a rank");
    for (auto& r : ranks) {
      char reply = 0;
      if (read(r.from, &reply, 1) != 1) die("read from a rank");
    }
  };
  const int expect = nranks * (nranks + 1) / 2;
  int failures = 0;
  auto check = [&](const char* mode, size_t count) {
    for (auto& r : ranks) {
      const char got = command(r, Command{'c', count});
      if (got != static_cast<char>('0' + expect)) {
        std::fprintf(stderr, "%s: rank %d holds a wrong sum\n", mode,
                     static_cast<int>(&r - ranks.data()));
        ++failures;
      }
    }
  };
  // The pool mode's result is in the slots: every element of every slot the full sum.
  auto check_pool = [&](size_t count) {
    for (auto& r : ranks) {
      if (!std::all_of(r.slot, r.slot + count,
                       [&](float v) { return v == static_cast<float>(expect); })) {
        std::fprintf(stderr, "pool: rank %d's slot holds a wrong sum\n",
                     static_cast<int>(&r - ranks.data()));
        ++failures;
      }
    }
  };
  const size_t chunk_elems = chunk_kib * 1024 / sizeof(float);
  std::vector<std::vector<float>> bounces(static_cast<size_t>(threads),
                                          std::vector<float>(ranks.size() * chunk_elems, 0.0f));
  for (size_t mib : sizes_mib) {
    const size_t count = mib << 18;
    double median[3] = {};
    for (int mode = 0; mode < 3; ++mode) {
      std::vector<double> secs;
      for (int it = 0; it < iters + 2; ++it) {
        all_parallel('r', count);
        if (mode == 0) all_parallel('i', count);  // pool: the data is already in shared memory
        const auto t0 = Clock::now();
        if (mode == 0) {
          reduce_in_place(ranks, count, 131072, threads);
        } else if (mode == 1) {
          all_parallel('i', count);
          reduce_in_place(ranks, count, 131072, threads);
          all_parallel('o', count);
        } else {
          reduce_remote(ranks, count, chunk_elems, threads, bounces);
        }
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        if (it >= 2) secs.push_back(s);  // two warm-up rounds
      }
      if (mode == 0) check_pool(count);
      if (mode == 1) check("stage", count);
      if (mode == 2) check("pvm", count);
      std::sort(secs.begin(), secs.end());
      median[mode] = secs[secs.size() / 2];
    }
    // busbw as plexus-bench reports it: 2(n-1)/n * bytes / time.
    const double factor = 2.0 * (nranks - 1) / nranks * static_cast<double>(count * sizeof(float));
    const double bw[3] = {factor / median[0] / 1e9, factor / median[1] / 1e9,
                          factor / median[2] / 1e9};
    std::printf("  %8zu %12.2f %12.2f %12.2f %10.2f %10.2f\n", mib, bw[0], bw[1], bw[2],
                bw[2] / bw[1], bw[2] / bw[0]);
    std::fflush(stdout);
  }
  for (auto& r : ranks) close(r.to);  // a closed pipe ends the rank
  for (auto& r : ranks) waitpid(r.pid, nullptr, 0);
  return failures == 0 ? 0 : 1;
}
