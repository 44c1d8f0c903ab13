/* NCCL's C API against Plexus's libnccl.so.2, on host buffers: every call the library
 * implements, from ranks in forked processes (one node). C, so that it is built exactly as
 * an NCCL program is: once against our nccl.h and once against NVIDIA's, both run against
 * our library (LD_LIBRARY_PATH). Needs a plexusd on $PLEXUS_SOCKET (nccl_api_test.sh).
 *
 * Each case prints "ok <name>" or "FAIL <name>: why"; the exit status is the failure count
 * (capped), 0 when all pass. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;

static void failf(const char* name, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fprintf(stderr, "FAIL %s: ", name);
  vfprintf(stderr, fmt, args);
  fprintf(stderr, "\n");
  va_end(args);
  ++failures;
}

#define CHECK(name, call)                                                                  \
  do {                                                                                     \
    ncclResult_t check_r_ = (call);                                                        \
    if (check_r_ != ncclSuccess) {                                                         \
      failf(name, "%s returned %d (%s): %s", #call, (int)check_r_,                         \
            ncclGetErrorString(check_r_), ncclGetLastError(NULL));                         \
      return;                                                                              \
    }                                                                                      \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Element access for every NCCL type as double (all values used are exact in each). */
static size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

static uint16_t to_half(double v) { /* small integers and halves: exact */
  float f = (float)v;
  uint32_t b;
  memcpy(&b, &f, 4);
  uint32_t sign = (b >> 16) & 0x8000u;
  if (f == 0.0f) return (uint16_t)sign;
  int32_t e = (int32_t)((b >> 23) & 0xff) - 127 + 15;
  return (uint16_t)(sign | ((uint32_t)e << 10) | ((b >> 13) & 0x3ffu));
}

static double from_half(uint16_t h) {
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu;
  double v = e == 0 ? m * (1.0 / 16777216.0) : (1.0 + m / 1024.0) * (double)(1u << e) / 32768.0;
  return (h & 0x8000u) ? -v : v;
}

static void put(void* buf, size_t i, ncclDataType_t t, double v) {
  char* p = (char*)buf + i * type_size(t);
  switch (t) {
    case ncclInt8: { int8_t x = (int8_t)(int64_t)v; memcpy(p, &x, 1); break; }
    case ncclUint8: { uint8_t x = (uint8_t)(int64_t)v; memcpy(p, &x, 1); break; }
    case ncclInt32: { int32_t x = (int32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case ncclUint32: { uint32_t x = (uint32_t)(int64_t)v; memcpy(p, &x, 4); break; }
    case ncclInt64: { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case ncclUint64: { uint64_t x = (uint64_t)(int64_t)v; memcpy(p, &x, 8); break; }
    case ncclFloat16: { uint16_t x = to_half(v); memcpy(p, &x, 2); break; }
    case ncclBfloat16: { float f = (float)v; uint32_t b; memcpy(&b, &f, 4);
                         uint16_t x = (uint16_t)(b >> 16); memcpy(p, &x, 2); break; }
    case ncclFloat32: { float x = (float)v; memcpy(p, &x, 4); break; }
    default: { memcpy(p, &v, 8); break; }
  }
}

static double get(const void* buf, size_t i, ncclDataType_t t) {
  const char* p = (const char*)buf + i * type_size(t);
  switch (t) {
    case ncclInt8: { int8_t x; memcpy(&x, p, 1); return x; }
    case ncclUint8: { uint8_t x; memcpy(&x, p, 1); return x; }
    case ncclInt32: { int32_t x; memcpy(&x, p, 4); return x; }
    case ncclUint32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case ncclInt64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclUint64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case ncclFloat16: { uint16_t x; memcpy(&x, p, 2); return from_half(x); }
    case ncclBfloat16: { uint16_t x; memcpy(&x, p, 2); uint32_t b = (uint32_t)x << 16;
                         float f; memcpy(&f, &b, 4); return f; }
    case ncclFloat32: { float x; memcpy(&x, p, 4); return x; }
    default: { double x; memcpy(&x, p, 8); return x; }
  }
}

static int is_integer(ncclDataType_t t) { return t <= ncclUint64; }

/* Rank r's input element i: small positive integers, so every result is exact. */
static double input(int r, size_t i) { return (double)(r + 1 + (int)(i % 3)); }

static double expected(ncclRedOp_t op, int n, size_t i, ncclDataType_t t) {
  double acc = input(0, i);
  for (int r = 1; r < n; ++r) {
    double v = input(r, i);
    if (op == ncclSum || op == ncclAvg) acc += v;
    else if (op == ncclProd) acc *= v;
    else if (op == ncclMax) acc = v > acc ? v : acc;
    else acc = v < acc ? v : acc;
  }
  if (op == ncclAvg) acc = is_integer(t) ? (double)((int64_t)acc / n) : acc / n;
  /* What the element type holds: integers wrap. */
  char tmp[8];
  put(tmp, 0, t, acc);
  return get(tmp, 0, t);
}

static const ncclDataType_t kTypes[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64,
                                        ncclUint64, ncclFloat16, ncclFloat32, ncclFloat64,
                                        ncclBfloat16};
static const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

/* ---- the cases, run by every rank of a communicator ---- */

static void case_queries(ncclComm_t comm, int rank, int n) {
  int count = -1, me = -1, device = -1;
  CHECK("queries", ncclCommCount(comm, &count));
  CHECK("queries", ncclCommUserRank(comm, &me));
  CHECK("queries", ncclCommCuDevice(comm, &device));
  if (count != n || me != rank || device != 0) {
    failf("queries", "count %d rank %d device %d, wanted %d %d 0", count, me, device, n, rank);
    return;
  }
  if (rank == 0) printf("ok queries\n");
}

static void case_allreduce(ncclComm_t comm, int rank, int n) {
  const size_t count = 1031;
  for (size_t ti = 0; ti < sizeof(kTypes) / sizeof(kTypes[0]); ++ti) {
    ncclDataType_t t = kTypes[ti];
    for (size_t oi = 0; oi < sizeof(kOps) / sizeof(kOps[0]); ++oi) {
      ncclRedOp_t op = kOps[oi];
      void* send = malloc(count * type_size(t));
      void* recv = malloc(count * type_size(t));
      for (size_t i = 0; i < count; ++i) put(send, i, t, input(rank, i));
      /* out of place, then in place */
      CHECK("allreduce", ncclAllReduce(send, recv, count, t, op, comm, NULL));
      CHECK("allreduce", ncclAllReduce(send, send, count, t, op, comm, NULL));
      for (size_t i = 0; i < count; ++i) {
        double want = expected(op, n, i, t);
        if (get(recv, i, t) != want || get(send, i, t) != want) {
          failf("allreduce", "type %d op %d element %zu: %g / %g in place, wanted %g", (int)t,
                (int)op, i, get(recv, i, t), get(send, i, t), want);
          free(send);
          free(recv);
          return;
        }
      }
      free(send);
      free(recv);
    }
  }
  if (rank == 0) printf("ok allreduce: 10 types x 5 ops, in and out of place\n");
}

static void case_movement(ncclComm_t comm, int rank, int n) {
  const size_t count = 777;
  float* send = malloc(count * n * sizeof(float));
  float* recv = malloc(count * n * sizeof(float));
  for (size_t i = 0; i < count * n; ++i) send[i] = (float)(rank * 100000 + (int)i);

  CHECK("broadcast", ncclBroadcast(send, recv, count, ncclFloat, 2 % n, comm, NULL));
  for (size_t i = 0; i < count; ++i) {
    if (recv[i] != (float)((2 % n) * 100000 + (int)i)) { failf("broadcast", "element %zu", i); return; }
  }
  memcpy(recv, send, count * sizeof(float));
  CHECK("bcast", ncclBcast(recv, count, ncclFloat, 0, comm, NULL));
  for (size_t i = 0; i < count; ++i) {
    if (recv[i] != (float)i) { failf("bcast", "element %zu: %g", i, recv[i]); return; }
  }
  memset(recv, 0, count * sizeof(float));
  CHECK("reduce", ncclReduce(send, recv, count, ncclFloat, ncclMax, 1 % n, comm, NULL));
  if (rank == 1 % n) {
    for (size_t i = 0; i < count; ++i) {
      if (recv[i] != (float)((n - 1) * 100000 + (int)i)) { failf("reduce", "element %zu", i); return; }
    }
  }
  CHECK("allgather", ncclAllGather(send, recv, count, ncclFloat, comm, NULL));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      if (recv[r * count + i] != (float)(r * 100000 + (int)i)) {
        failf("allgather", "block %d element %zu", r, i);
        return;
      }
    }
  }
  CHECK("reducescatter", ncclReduceScatter(send, recv, count, ncclFloat, ncclSum, comm, NULL));
  for (size_t i = 0; i < count; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += r * 100000 + (double)(rank * count + i);
    if (recv[i] != (float)want) { failf("reducescatter", "element %zu: %g wanted %g", i, recv[i], want); return; }
  }
  CHECK("alltoall", ncclAlltoAll(send, recv, count, ncclFloat, comm, NULL));
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) {
      if (recv[r * count + i] != (float)(r * 100000 + (int)(rank * count + i))) {
        failf("alltoall", "block %d element %zu", r, i);
        return;
      }
    }
  }
  memset(recv, 0, count * n * sizeof(float));
  CHECK("gather", ncclGather(send, recv, count, ncclFloat, n - 1, comm, NULL));
  if (rank == n - 1) {
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        if (recv[r * count + i] != (float)(r * 100000 + (int)i)) { failf("gather", "block %d", r); return; }
      }
    }
  }
  CHECK("scatter", ncclScatter(send, recv, count, ncclFloat, 0, comm, NULL));
  for (size_t i = 0; i < count; ++i) {
    if (recv[i] != (float)(rank * count + i)) { failf("scatter", "element %zu", i); return; }
  }
  free(send);
  free(recv);
  if (rank == 0) printf("ok broadcast bcast reduce allgather reducescatter alltoall gather scatter\n");
}

/* Sends and receives in groups: a ring both ways at once (which deadlocks unless the group
 * submits them together), with buffers from ncclMemAlloc. */
static void case_p2p(ncclComm_t comm, int rank, int n) {
  const size_t count = 100003;
  int64_t *out = NULL, *left = NULL, *right = NULL;
  CHECK("p2p", ncclMemAlloc((void**)&out, count * 8));
  CHECK("p2p", ncclMemAlloc((void**)&left, count * 8));
  CHECK("p2p", ncclMemAlloc((void**)&right, count * 8));
  for (size_t i = 0; i < count; ++i) out[i] = rank * 1000000007LL + (int64_t)i;
  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  CHECK("p2p", ncclGroupStart());
  CHECK("p2p", ncclSend(out, count, ncclInt64, next, comm, NULL));
  CHECK("p2p", ncclSend(out, count, ncclInt64, prev, comm, NULL));
  CHECK("p2p", ncclRecv(left, count, ncclInt64, prev, comm, NULL));
  CHECK("p2p", ncclRecv(right, count, ncclInt64, next, comm, NULL));
  CHECK("p2p", ncclGroupEnd());
  for (size_t i = 0; i < count; ++i) {
    if (left[i] != prev * 1000000007LL + (int64_t)i || right[i] != next * 1000000007LL + (int64_t)i) {
      failf("p2p", "element %zu", i);
      return;
    }
  }
  CHECK("p2p", ncclMemFree(out));
  CHECK("p2p", ncclMemFree(left));
  CHECK("p2p", ncclMemFree(right));
  if (rank == 0) printf("ok grouped send/recv ring, ncclMemAlloc buffers\n");
}

static void case_premulsum(ncclComm_t comm, int rank, int n) {
  ncclRedOp_t op;
  double scalar = 0.25;
  CHECK("premulsum", ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat64, ncclScalarHostImmediate, comm));
  scalar = 100;  /* host immediate: read at creation, not later */
  double in[5], out[5];
  for (int i = 0; i < 5; ++i) in[i] = rank + i;
  CHECK("premulsum", ncclAllReduce(in, out, 5, ncclFloat64, op, comm, NULL));
  for (int i = 0; i < 5; ++i) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += (r + i) * 0.25;
    if (out[i] != want) { failf("premulsum", "element %d: %g wanted %g", i, out[i], want); return; }
  }
  CHECK("premulsum", ncclRedOpDestroy(op, comm));
  ncclResult_t r = ncclAllReduce(in, out, 5, ncclFloat64, op, comm, NULL);
  if (r != ncclInvalidArgument) { failf("premulsum", "a destroyed op gave %d", (int)r); return; }
  if (rank == 0) printf("ok pre-multiplied sum; a destroyed op refused: %s\n", ncclGetLastError(comm));
}

static void case_errors(ncclComm_t comm, int rank, int n) {
  float x[4] = {0};
  ncclResult_t r = ncclAllReduce(x, x, 4, ncclFloat8e4m3, ncclSum, comm, NULL);
  if (r != ncclInvalidArgument || strstr(ncclGetLastError(comm), "fp8") == NULL) {
    failf("errors", "fp8 gave %d: %s", (int)r, ncclGetLastError(comm));
    return;
  }
  r = ncclBroadcast(x, x, 4, ncclFloat, n + 3, comm, NULL);
  if (r != ncclInvalidArgument || strstr(ncclGetLastError(comm), "root") == NULL) {
    failf("errors", "root %d of %d gave %d: %s", n + 3, n, (int)r, ncclGetLastError(comm));
    return;
  }
  r = ncclGroupEnd();
  if (r != ncclInvalidUsage) { failf("errors", "ncclGroupEnd without a group gave %d", (int)r); return; }
  r = ncclAllReduce(x, x, 4, ncclFloat, ncclSum, NULL, NULL);
  if (r != ncclInvalidArgument) { failf("errors", "a NULL comm gave %d", (int)r); return; }
  for (int i = 0; i < ncclNumResults; ++i) {
    if (ncclGetErrorString((ncclResult_t)i) == NULL) { failf("errors", "no string for %d", i); return; }
  }
  if (rank == 0) printf("ok errors: fp8, bad root, unopened group, NULL comm, strings\n");
}

/* Split: even and odd ranks, keys reversing the order; the last rank opts out. */
static void case_split(ncclComm_t comm, int rank, int n) {
  ncclComm_t sub = NULL;
  const int color = rank == n - 1 ? NCCL_SPLIT_NOCOLOR : rank % 2;
  CHECK("split", ncclCommSplit(comm, color, -rank, &sub, NULL));
  if (color == NCCL_SPLIT_NOCOLOR) {
    if (sub != NULL) failf("split", "NCCL_SPLIT_NOCOLOR gave a communicator");
    return;
  }
  int members = 0;
  for (int r = 0; r < n - 1; ++r) members += r % 2 == color;
  int count = 0, me = 0;
  CHECK("split", ncclCommCount(sub, &count));
  CHECK("split", ncclCommUserRank(sub, &me));
  int position = 0; /* ranks of my color above me come first (larger rank, smaller key) */
  for (int r = rank + 1; r < n - 1; ++r) position += r % 2 == color;
  if (count != members || me != position) {
    failf("split", "rank %d: size %d rank %d, wanted %d %d", rank, count, me, members, position);
    return;
  }
  int64_t v = rank, sum = 0;
  CHECK("split", ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, sub, NULL));
  int64_t want = 0;
  for (int r = 0; r < n - 1; ++r) want += r % 2 == color ? r : 0;
  if (sum != want) { failf("split", "sum %lld wanted %lld", (long long)sum, (long long)want); return; }
  CHECK("split", ncclCommDestroy(sub));
  if (rank == 0) printf("ok split by color and key, NOCOLOR\n");
}

/* A non-blocking communicator: init and an allreduce followed with ncclCommGetAsyncError. */
static void case_nonblocking(ncclUniqueId id, int rank, int n) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, n, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) { failf("nonblocking", "init gave %d", (int)r); return; }
  ncclResult_t state = ncclInProgress;
  const double deadline = now_s() + 60;
  int polls = 0;
  do {
    CHECK("nonblocking", ncclCommGetAsyncError(comm, &state));
    ++polls;
    if (state == ncclInProgress) usleep(1000);
  } while (state == ncclInProgress && now_s() < deadline);
  if (state != ncclSuccess) { failf("nonblocking", "init ended with %d: %s", (int)state, ncclGetLastError(comm)); return; }
  const size_t count = 1 << 20;
  float* buf = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) buf[i] = 1.0f;
  r = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  if (r != ncclSuccess && r != ncclInProgress) { failf("nonblocking", "allreduce gave %d", (int)r); return; }
  do {
    CHECK("nonblocking", ncclCommGetAsyncError(comm, &state));
    if (state == ncclInProgress) usleep(100);
  } while (state == ncclInProgress && now_s() < deadline);
  if (state != ncclSuccess || buf[0] != (float)n || buf[count - 1] != (float)n) {
    failf("nonblocking", "allreduce state %d, values %g %g", (int)state, buf[0], buf[count - 1]);
    return;
  }
  free(buf);
  CHECK("nonblocking", ncclCommFinalize(comm));
  CHECK("nonblocking", ncclCommDestroy(comm));
  if (rank == 0) printf("ok non-blocking init and allreduce (init polled %d times)\n", polls);
}

struct AbortLater {
  ncclComm_t comm;
  int delay_ms;
};

static void* abort_later(void* arg) {
  struct AbortLater* a = (struct AbortLater*)arg;
  usleep((useconds_t)a->delay_ms * 1000);
  ncclCommAbort(a->comm);
  return NULL;
}

/* Rank 0 blocks in an allreduce rank 1 never makes, and aborts it from another thread;
 * rank 1, waiting for a send rank 0 never makes, gets a remote error naming rank 0. */
static void case_abort(ncclUniqueId id, int rank) {
  ncclComm_t comm = NULL;
  CHECK("abort", ncclCommInitRank(&comm, 2, id, rank));
  float x[16] = {0};
  const double start = now_s();
  if (rank == 0) {
    pthread_t thread;
    struct AbortLater a = {comm, 300};
    pthread_create(&thread, NULL, abort_later, &a);
    ncclResult_t r = ncclAllReduce(x, x, 16, ncclFloat, ncclSum, comm, NULL);
    pthread_join(thread, NULL);
    if (r == ncclSuccess) { failf("abort", "the aborted allreduce succeeded"); return; }
    printf("ok abort mid-collective: rank 0's allreduce returned %d after %.2f s: %s\n", (int)r,
           now_s() - start, ncclGetLastError(NULL));
  } else {
    ncclResult_t r = ncclRecv(x, 16, ncclFloat, 0, comm, NULL);
    if (r != ncclRemoteError || strstr(ncclGetLastError(comm), "rank 0") == NULL) {
      failf("abort", "rank 1's recv gave %d: %s", (int)r, ncclGetLastError(comm));
    } else {
      printf("ok the peer's recv failed in %.2f s: %s\n", now_s() - start, ncclGetLastError(comm));
    }
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(comm, &state);
    if (state != ncclRemoteError) failf("abort", "async error after the peer left: %d", (int)state);
    ncclCommAbort(comm);
  }
}

/* A non-blocking init whose other rank never comes, aborted: returns at once. */
static void case_abort_init(ncclUniqueId id) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, 0, &config);
  if (r != ncclInProgress) { failf("abort_init", "init gave %d", (int)r); return; }
  usleep(100 * 1000);
  ncclResult_t state = ncclSuccess;
  CHECK("abort_init", ncclCommGetAsyncError(comm, &state));
  if (state != ncclInProgress) { failf("abort_init", "state %d while the peer is missing", (int)state); return; }
  const double start = now_s();
  CHECK("abort_init", ncclCommAbort(comm));
  if (now_s() - start > 1.0) { failf("abort_init", "abort took %.2f s", now_s() - start); return; }
  printf("ok non-blocking init aborted while waiting for its peer\n");
}

/* NCCL 2.29's ncclCommGetUniqueId and ncclCommGrow, looked up at run time so that this source
 * builds against NVIDIA's 2.28 header too: rank 0 of the shrunk communicator makes the id and
 * forks the replacement rank (it inherits the id), the members grow back to n ranks. */
typedef ncclResult_t (*GetIdFn)(ncclComm_t, ncclUniqueId*);
typedef ncclResult_t (*GrowFn)(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*,
                               ncclConfig_t*);

static int grown_sum_ok(ncclComm_t grown, int n) {
  int64_t v = 1, sum = 0;
  if (ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, grown, NULL) != ncclSuccess) return 0;
  return sum == n;
}

static void case_grow(ncclComm_t sub, int rank, int n) {
  GetIdFn get_id = (GetIdFn)dlsym(RTLD_DEFAULT, "ncclCommGetUniqueId");
  GrowFn grow = (GrowFn)dlsym(RTLD_DEFAULT, "ncclCommGrow");
  if (get_id == NULL || grow == NULL) {
    if (rank == 0) printf("skip grow: this libnccl has no ncclCommGrow (NCCL 2.29's)\n");
    return;
  }
  pid_t replacement = -1;
  if (rank == 0) {
    ncclUniqueId id;
    CHECK("grow", get_id(sub, &id));
    replacement = fork();
    if (replacement == 0) {
      ncclComm_t grown = NULL;
      const int ok = grow(NULL, n, &id, n - 1, &grown, NULL) == ncclSuccess && grown_sum_ok(grown, n);
      if (!ok) fprintf(stderr, "FAIL grow: the new rank: %s\n", ncclGetLastError(NULL));
      _exit(ok ? 0 : 1);
    }
  }
  ncclComm_t grown = NULL;
  int count = 0, me = -1;
  if (grow(sub, n, NULL, -1, &grown, NULL) != ncclSuccess) {
    failf("grow", "rank %d: %s", rank, ncclGetLastError(NULL));
  } else if (ncclCommCount(grown, &count) != ncclSuccess ||
             ncclCommUserRank(grown, &me) != ncclSuccess || count != n || me != rank) {
    failf("grow", "size %d rank %d", count, me);
  } else if (!grown_sum_ok(grown, n)) {
    failf("grow", "the grown allreduce is wrong");
  }
  if (grown != NULL) ncclCommDestroy(grown);
  if (rank == 0) { /* always reaped: the replacement exits once its part failed or passed */
    int status = 0;
    waitpid(replacement, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      failf("grow", "the replacement rank exited with 0x%x", status);
    } else {
      printf("ok grow back to %d ranks with a replacement rank (ncclCommGrow)\n", n);
    }
  }
}

/* NCCL 2.29's ncclCommSuspend and ncclCommResume (looked up at run time, as above): a
 * suspended communicator refuses operations, takes them again once resumed, and bad flags
 * are refused. */
typedef ncclResult_t (*SuspendFn)(ncclComm_t, int);
typedef ncclResult_t (*ResumeFn)(ncclComm_t);

static void case_suspend(ncclComm_t comm, int rank, int n) {
  SuspendFn suspend = (SuspendFn)dlsym(RTLD_DEFAULT, "ncclCommSuspend");
  ResumeFn resume = (ResumeFn)dlsym(RTLD_DEFAULT, "ncclCommResume");
  if (suspend == NULL || resume == NULL) {
    if (rank == 0) printf("skip suspend: this libnccl has no ncclCommSuspend (NCCL 2.29's)\n");
    return;
  }
  if (suspend(comm, 0x02) != ncclInvalidArgument) { failf("suspend", "flags 0x02 accepted"); return; }
  CHECK("suspend", suspend(comm, 0x01 /* NCCL_SUSPEND_MEM */));
  int64_t v = 1, sum = 0;
  if (ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, NULL) == ncclSuccess) {
    failf("suspend", "an allreduce on a suspended communicator succeeded");
    return;
  }
  CHECK("suspend", resume(comm));
  CHECK("suspend", ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, NULL));
  if (sum != n) { failf("suspend", "the allreduce after resume gave %lld", (long long)sum); return; }
  if (rank == 0) printf("ok suspend refuses operations until resume (ncclCommSuspend)\n");
}

/* The last rank's process is killed after init; the survivors' allreduce fails, they revoke
 * the communicator and shrink it without the lost rank (no unique id), and the successor's
 * allreduce is exact; then it grows back with a replacement rank. Bad flags are refused. */
static void case_revoke_shrink(ncclUniqueId id, int rank, int n) {
  if (rank == n - 1) {
    pid_t member = fork(); /* the member that dies: this process must exit cleanly */
    if (member == 0) {
      ncclComm_t comm = NULL;
      if (ncclCommInitRank(&comm, n, id, rank) == ncclSuccess) raise(SIGKILL);
      _exit(1);
    }
    int status = 0;
    waitpid(member, &status, 0);
    if (!WIFSIGNALED(status)) failf("shrink", "the lost rank's init failed (status 0x%x)", status);
    return;
  }
  ncclComm_t comm = NULL;
  CHECK("shrink", ncclCommInitRank(&comm, n, id, rank));
  int64_t v = rank + 1, sum = 0;
  ncclResult_t r = ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, NULL);
  if (r == ncclSuccess) { failf("shrink", "an allreduce without the lost rank succeeded"); return; }
  if (ncclCommRevoke(comm, 5) != ncclInvalidArgument) failf("shrink", "revoke flags 5 accepted");
  CHECK("shrink", ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
  r = ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, comm, NULL);
  if (r == ncclSuccess) { failf("shrink", "an allreduce on a revoked communicator succeeded"); return; }
  int lost = n - 1;
  ncclComm_t sub = NULL;
  if (ncclCommShrink(comm, &lost, 1, &sub, NULL, 7) != ncclInvalidArgument || sub != NULL) {
    failf("shrink", "shrink flags 7 accepted");
    return;
  }
  const double start = now_s();
  CHECK("shrink", ncclCommShrink(comm, &lost, 1, &sub, NULL, NCCL_SHRINK_DEFAULT));
  const double took = now_s() - start;
  int count = 0, me = -1;
  CHECK("shrink", ncclCommCount(sub, &count));
  CHECK("shrink", ncclCommUserRank(sub, &me));
  if (count != n - 1 || me != rank) { failf("shrink", "size %d rank %d", count, me); return; }
  CHECK("shrink", ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, sub, NULL));
  if (sum != (int64_t)(n - 1) * n / 2) { failf("shrink", "sum %lld", (long long)sum); return; }
  if (rank == 0) printf("ok revoke, then shrink without the lost rank in %.3f s, exact\n", took);
  /* A revoke of a live communicator: the others' allreduce, waiting for rank 0, fails. */
  if (rank == 0) {
    usleep(200 * 1000);
    CHECK("revoke", ncclCommRevoke(sub, NCCL_REVOKE_DEFAULT));
  } else {
    r = ncclAllReduce(&v, &sum, 1, ncclInt64, ncclSum, sub, NULL);
    if (r != ncclInvalidUsage || strstr(ncclGetLastError(NULL), "revoked by rank 0") == NULL) {
      failf("revoke", "the allreduce rank 0 revoked gave %d: %s", (int)r, ncclGetLastError(NULL));
      return;
    }
  }
  if (rank == 0) printf("ok a revoke fails the others' pending allreduce naming rank 0\n");
  case_grow(sub, rank, n);
  CHECK("shrink", ncclCommDestroy(sub));
  CHECK("shrink", ncclCommDestroy(comm));
}

/* ncclCommInitAll: two ranks in this process, driven from one thread through a group. */
static void case_init_all(void) {
  ncclComm_t comms[2] = {NULL, NULL};
  int devs[2] = {0, 0};
  CHECK("init_all", ncclCommInitAll(comms, 2, devs));
  int32_t in[2][8], out[2][8];
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 8; ++i) in[c][i] = c * 10 + i;
  CHECK("init_all", ncclGroupStart());
  for (int c = 0; c < 2; ++c) CHECK("init_all", ncclAllReduce(in[c], out[c], 8, ncclInt32, ncclSum, comms[c], NULL));
  CHECK("init_all", ncclGroupEnd());
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 8; ++i)
      if (out[c][i] != 10 + 2 * i) { failf("init_all", "comm %d element %d: %d", c, i, out[c][i]); return; }
  for (int c = 0; c < 2; ++c) CHECK("init_all", ncclCommDestroy(comms[c]));
  /* The same by hand: ncclCommInitRank for both ranks inside one group (blocking each alone
   * would wait for the other forever). */
  ncclUniqueId id;
  CHECK("init_all", ncclGetUniqueId(&id));
  CHECK("init_all", ncclGroupStart());
  for (int c = 0; c < 2; ++c) CHECK("init_all", ncclCommInitRank(&comms[c], 2, id, c));
  CHECK("init_all", ncclGroupEnd());
  CHECK("init_all", ncclGroupStart());
  for (int c = 0; c < 2; ++c) CHECK("init_all", ncclAllReduce(in[c], out[c], 8, ncclInt32, ncclMax, comms[c], NULL));
  CHECK("init_all", ncclGroupEnd());
  for (int i = 0; i < 8; ++i)
    if (out[0][i] != 10 + i || out[1][i] != 10 + i) { failf("init_all", "grouped init: element %d", i); return; }
  for (int c = 0; c < 2; ++c) CHECK("init_all", ncclCommDestroy(comms[c]));
  printf("ok ncclCommInitAll, and ncclCommInitRank x 2 in one group, each driven by one thread\n");
}

/* NCCL 2.28's device API (nccl_device.h; looked up by name, as neither nccl.h declares it):
 * every entry point NVIDIA's library exports is there, so a program linked against them
 * (PyTorch 2.11) loads; a device communicator is refused, saying why; the teams are those
 * of ranks that share no memory. */
struct team { int nRanks, rank, stride; };
static void case_device_api(ncclComm_t comm, int rank, int n) {
  static const char* names[] = {
      "ncclDevCommCreate", "ncclDevCommDestroy", "ncclGinBarrierCreateRequirement",
      "ncclLLA2ACalcSlots", "ncclLLA2ACreateRequirement", "ncclLsaBarrierCreateRequirement",
      "ncclTeamLsa", "ncclTeamRail", "ncclTeamRankToLsa", "ncclTeamRankToWorld", "ncclTeamWorld",
      "ncclResetDebugInitInternal"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); ++i) {
    if (dlsym(RTLD_DEFAULT, names[i]) == NULL) { failf("device_api", "%s is not exported", names[i]); return; }
  }
  ncclResult_t (*create)(ncclComm_t, const void*, void*) =
      (ncclResult_t(*)(ncclComm_t, const void*, void*))dlsym(RTLD_DEFAULT, "ncclDevCommCreate");
  struct team (*world)(ncclComm_t) = (struct team(*)(ncclComm_t))dlsym(RTLD_DEFAULT, "ncclTeamWorld");
  struct team (*lsa)(ncclComm_t) = (struct team(*)(ncclComm_t))dlsym(RTLD_DEFAULT, "ncclTeamLsa");
  int (*to_world)(ncclComm_t, struct team, int) =
      (int (*)(ncclComm_t, struct team, int))dlsym(RTLD_DEFAULT, "ncclTeamRankToWorld");
  char dev_comm[512];
  ncclResult_t r = create(comm, NULL, dev_comm);
  if (r != ncclInvalidUsage || strstr(ncclGetLastError(comm), "no device API") == NULL) {
    failf("device_api", "ncclDevCommCreate gave %d: %s", (int)r, ncclGetLastError(comm));
    return;
  }
  struct team w = world(comm), l = lsa(comm);
  if (w.nRanks != n || w.rank != rank || w.stride != 1 || l.nRanks != 1 || l.rank != 0 ||
      to_world(comm, w, n - 1) != n - 1) {
    failf("device_api", "teams: world {%d, %d, %d}, lsa {%d, %d, %d}", w.nRanks, w.rank,
          w.stride, l.nRanks, l.rank, l.stride);
    return;
  }
  if (rank == 0) printf("ok NCCL's device API: exported, a device communicator refused: %s\n", ncclGetLastError(comm));
}

static int run_rank(const ncclUniqueId* ids, int rank, int n) {
  ncclComm_t comm = NULL;
  ncclResult_t r = ncclCommInitRank(&comm, n, ids[0], rank);
  if (r != ncclSuccess) {
    failf("init", "rank %d: %d %s", rank, (int)r, ncclGetLastError(NULL));
    return failures;
  }
  case_queries(comm, rank, n);
  case_allreduce(comm, rank, n);
  case_movement(comm, rank, n);
  case_p2p(comm, rank, n);
  case_premulsum(comm, rank, n);
  case_errors(comm, rank, n);
  case_split(comm, rank, n);
  case_suspend(comm, rank, n);
  case_device_api(comm, rank, n);
  r = ncclCommFinalize(comm);
  if (r != ncclSuccess) failf("finalize", "%d", (int)r);
  r = ncclCommDestroy(comm);
  if (r != ncclSuccess) failf("destroy", "%d", (int)r);
  case_nonblocking(ids[1], rank, n);
  if (rank < 2) case_abort(ids[2], rank);
  case_revoke_shrink(ids[4], rank, n);
  return failures;
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* the ranks leave with _exit: nothing left buffered */
  const int n = argc > 1 ? atoi(argv[1]) : 4;
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version < 22800) {
    fprintf(stderr, "FAIL version: %d\n", version);
    return 1;
  }
  printf("ok version %d\n", version);
  /* The ids every rank needs, made before the fork (as a launcher would hand them out). */
  ncclUniqueId ids[5];
  for (int i = 0; i < 5; ++i) {
    if (ncclGetUniqueId(&ids[i]) != ncclSuccess) {
      fprintf(stderr, "FAIL unique id: %s\n", ncclGetLastError(NULL));
      return 1;
    }
  }
  pid_t pids[64];
  for (int rank = 0; rank < n; ++rank) {
    pids[rank] = fork();
    if (pids[rank] == 0) {
      alarm(240); /* no hang outlives the test */
      _exit(run_rank(ids, rank, n) > 0 ? 1 : 0);
    }
  }
  int bad = 0;
  for (int rank = 0; rank < n; ++rank) {
    int status = 0;
    waitpid(pids[rank], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "FAIL rank %d exited with status 0x%x\n", rank, status);
      ++bad;
    }
  }
  pid_t child = fork();
  if (child == 0) {
    alarm(120);
    case_init_all();
    case_abort_init(ids[3]);
    _exit(failures > 0 ? 1 : 0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++bad;
  if (bad == 0) {
    printf("all passed\n");
  } else {
    printf("%d processes failed\n", bad);
  }
  return bad > 0 ? 1 : 0;
}
