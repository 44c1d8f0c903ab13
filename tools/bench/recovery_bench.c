/* Recovery from a lost node, as a rank sees it (tools/bench/recovery.sh drives one per
 * node of a namespace cluster). Every rank forms a communicator from a unique id in a file,
 * runs exact 1 MiB allreduces and writes <dir>/ready.<rank>; the harness then kills the last
 * rank's node (daemon and rank) and writes the kill's CLOCK_REALTIME to <dir>/killed_at. The
 * survivors' allreduce fails (detection), then
 *   --mode shrink    plexus_comm_shrink without the lost rank (agreement), or
 *   --mode recreate  abort, rank 0 writes a fresh unique id, all init anew (agreement),
 * and the first allreduce on the new communicator is checked exact (first op). Each survivor
 * prints one line: "rank R detect_ms D agree_ms A first_ms F total_ms T" (from the kill).
 *   recovery_bench --dir DIR --rank R --nranks N --mode shrink|recreate [--timeout-s S] */
#include <errno.h>
#include <plexus/plexus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COUNT (1u << 18) /* floats: 1 MiB */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t); /* one clock across the namespaces */
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int fail(const char* what, plexus_result_t r) {
  fprintf(stderr, "recovery_bench: %s: %s: %s\n", what, plexus_result_string(r),
          plexus_get_last_error());
  return 1;
}

/* Rank 0 writes `id` to `path` (atomically); the others wait for it. */
static int share_id(const char* path, int rank, plexus_unique_id_t* id, double deadline) {
  if (rank == 0) {
    plexus_result_t r = plexus_get_unique_id(id);
    if (r != PLEXUS_SUCCESS) return fail("get_unique_id", r);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (f == NULL || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path)) {
      fprintf(stderr, "recovery_bench: cannot write %s: %s\n", path, strerror(errno));
      return 1;
    }
    return 0;
  }
  while (now_ms() < deadline) {
    FILE* f = fopen(path, "rb");
    if (f != NULL) {
      const size_t got = fread(id, sizeof *id, 1, f);
      fclose(f);
      if (got == 1) return 0;
    }
    usleep(2000);
  }
  fprintf(stderr, "recovery_bench: no unique id in %s\n", path);
  return 1;
}

/* One exact allreduce: every rank contributes rank + 1 + i % 7. */
static plexus_result_t exact_allreduce(plexus_comm_t comm, float* buf, int* wrong) {
  int rank = 0, n = 0;
  plexus_comm_user_rank(comm, &rank);
  plexus_comm_count(comm, &n);
  for (size_t i = 0; i < COUNT; ++i) buf[i] = (float)(rank + 1 + (int)(i % 7));
  plexus_result_t r = plexus_allreduce(buf, buf, COUNT, PLEXUS_FLOAT32, PLEXUS_SUM, comm, NULL);
  if (r != PLEXUS_SUCCESS) return r;
  *wrong = 0;
  for (size_t i = 0; i < COUNT; ++i) {
    const float want = (float)(n * (n + 1) / 2 + n * (int)(i % 7));
    *wrong += buf[i] != want;
  }
  return PLEXUS_SUCCESS;
}

int main(int argc, char** argv) {
  const char* dir = NULL;
  const char* mode = "shrink";
  int rank = -1, nranks = 0, timeout_s = 60;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else if (!strcmp(argv[i], "--rank"))
      rank = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nranks"))
      nranks = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--mode"))
      mode = argv[i + 1];
    else if (!strcmp(argv[i], "--timeout-s"))
      timeout_s = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "recovery_bench: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  const int shrink = strcmp(mode, "shrink") == 0;
  if (dir == NULL || rank < 0 || nranks < 2 || rank >= nranks ||
      (!shrink && strcmp(mode, "recreate") != 0)) {
    fprintf(stderr, "usage: recovery_bench --dir DIR --rank R --nranks N --mode shrink|recreate\n");
    return 2;
  }
  const double deadline = now_ms() + timeout_s * 1e3;
  char path[4096];
  plexus_unique_id_t id;
  snprintf(path, sizeof path, "%s/id", dir);
  if (share_id(path, rank, &id, deadline)) return 1;
  plexus_comm_t comm = NULL;
  plexus_result_t r = plexus_comm_init_rank(&comm, nranks, id, rank);
  if (r != PLEXUS_SUCCESS) return fail("init", r);
  float* buf = NULL;
  if ((r = plexus_alloc((void**)&buf, COUNT * sizeof(float))) != PLEXUS_SUCCESS)
    return fail("alloc", r);
  int wrong = 0;
  if ((r = exact_allreduce(comm, buf, &wrong)) != PLEXUS_SUCCESS || wrong)
    return fail("first allreduce", r);
  snprintf(path, sizeof path, "%s/ready.%d", dir, rank);
  FILE* ready = fopen(path, "w");
  if (ready != NULL) fclose(ready);
  if (rank == nranks - 1) {
    pause(); /* killed with its node */
    return 0;
  }
  double failed = 0;
  while (now_ms() < deadline) {
    r = exact_allreduce(comm, buf, &wrong);
    if (r != PLEXUS_SUCCESS) {
      failed = now_ms();
      break;
    }
    if (wrong) {
      fprintf(stderr, "recovery_bench: %d wrong elements before the kill\n", wrong);
      return 1;
    }
  }
  if (failed == 0) {
    fprintf(stderr, "recovery_bench: the allreduce never failed\n");
    return 1;
  }
  plexus_comm_t next = NULL;
  const int lost = nranks - 1;
  if (shrink) {
    r = plexus_comm_shrink(comm, &lost, 1, PLEXUS_SHRINK_DEFAULT, &next);
    if (r != PLEXUS_SUCCESS) return fail("shrink", r);
  } else {
    plexus_comm_abort(comm);
    comm = NULL;
    snprintf(path, sizeof path, "%s/id2", dir);
    if (share_id(path, rank, &id, deadline)) return 1;
    r = plexus_comm_init_rank(&next, nranks - 1, id, rank);
    if (r != PLEXUS_SUCCESS) return fail("init again", r);
  }
  const double agreed = now_ms();
  if ((r = exact_allreduce(next, buf, &wrong)) != PLEXUS_SUCCESS) return fail("allreduce after", r);
  if (wrong) {
    fprintf(stderr, "recovery_bench: %d wrong elements after\n", wrong);
    return 1;
  }
  const double first = now_ms();
  double killed = 0;
  snprintf(path, sizeof path, "%s/killed_at", dir);
  FILE* k = fopen(path, "r");
  if (k == NULL || fscanf(k, "%lf", &killed) != 1) {
    fprintf(stderr, "recovery_bench: no %s\n", path);
    return 1;
  }
  fclose(k);
  killed /= 1e6; /* ns -> ms */
  printf("rank %d detect_ms %.1f agree_ms %.1f first_ms %.1f total_ms %.1f\n", rank,
         failed - killed, agreed - failed, first - agreed, first - killed);
  plexus_comm_destroy(next);
  if (comm != NULL) plexus_comm_destroy(comm);
  return 0;
}
