/* NCCL API allreduce busbw through Plexus's libnccl.so.2, timed as plexus-bench times its
 * rows (each iteration from the call to its completion; the mean; the slowest rank), so the
 * two can be read side by side. Host-ordered calls on ncclMemAlloc buffers (the pool).
 *
 * usage: nccl_api_bench [RANKS=4] [MINBYTES=1M] [MAXBYTES=64M] [ITERS=20]
 * Needs a plexusd on $PLEXUS_SOCKET (or autostart). */
#define _GNU_SOURCE
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char* s) {
  char* end = NULL;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  if (*end == 'G' || *end == 'g') v *= 1024.0 * 1024 * 1024;
  return (size_t)v;
}

#define OK(call)                                                                       \
  do {                                                                                 \
    ncclResult_t r_ = (call);                                                          \
    if (r_ != ncclSuccess) {                                                           \
      fprintf(stderr, "%s: %s (%s)\n", #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      _exit(1);                                                                        \
    }                                                                                  \
  } while (0)

static void rank_main(ncclUniqueId id, int rank, int n, size_t minb, size_t maxb, int iters) {
  ncclComm_t comm;
  OK(ncclCommInitRank(&comm, n, id, rank));
  float *send, *recv;
  double* slowest;
  OK(ncclMemAlloc((void**)&send, maxb));
  OK(ncclMemAlloc((void**)&recv, maxb));
  OK(ncclMemAlloc((void**)&slowest, sizeof(double)));
  for (size_t i = 0; i < maxb / 4; ++i) send[i] = (float)(rank + 1);
  if (rank == 0) printf("%12s %12s %10s %10s\n", "size", "time(us)", "algbw", "busbw");
  for (size_t bytes = minb; bytes <= maxb; bytes *= 2) {
    const size_t count = bytes / 4;
    for (int w = 0; w < 5; ++w) OK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL));
    double total = 0;
    for (int i = 0; i < iters; ++i) {
      const double start = now_s();
      OK(ncclAllReduce(send, recv, count, ncclFloat, ncclSum, comm, NULL));
      total += now_s() - start;
    }
    if (recv[count - 1] != (float)(n * (n + 1) / 2)) {
      fprintf(stderr, "rank %d: wrong result %g at %zu bytes\n", rank, recv[count - 1], bytes);
      _exit(1);
    }
    *slowest = total / iters;
    OK(ncclAllReduce(slowest, slowest, 1, ncclFloat64, ncclMax, comm, NULL));
    if (rank == 0) {
      const double algbw = (double)bytes / *slowest / 1e9;
      printf("%12zu %12.1f %10.2f %10.2f\n", bytes, *slowest * 1e6, algbw,
             algbw * 2.0 * (n - 1) / n);
    }
  }
  OK(ncclMemFree(send));
  OK(ncclMemFree(recv));
  OK(ncclMemFree(slowest));
  OK(ncclCommDestroy(comm));
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const int n = argc > 1 ? atoi(argv[1]) : 4;
  const size_t minb = argc > 2 ? parse_size(argv[2]) : 1 << 20;
  const size_t maxb = argc > 3 ? parse_size(argv[3]) : 64 << 20;
  const int iters = argc > 4 ? atoi(argv[4]) : 20;
  if (n < 1 || n > 64 || minb < 4 || maxb < minb || iters < 1) {
    fprintf(stderr, "usage: nccl_api_bench [RANKS] [MINBYTES] [MAXBYTES] [ITERS]\n");
    return 2;
  }
  ncclUniqueId id;
  OK(ncclGetUniqueId(&id));
  printf("# NCCL API (Plexus libnccl.so.2) allreduce float sum, %d ranks, mean of %d\n", n, iters);
  pid_t pids[64];
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) {
      rank_main(id, r, n, minb, maxb, iters);
      _exit(0);
    }
  }
  int failed = 0;
  for (int r = 0; r < n; ++r) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed == 0 ? 0 : 1;
}
