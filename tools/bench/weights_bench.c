/* The weight store on one node, as a trainer and a rollout see it: the trainer's stall per
 * publish (the call returns once plexusd holds a copy) against a memcpy of the same bytes
 * in the trainer's own process, from the pool (copied once, by the daemon) and from the
 * process's heap (staged through the pool first); and a pull of the newest version into the
 * pool. Each figure is the median of --reps; one line per size:
 *   bytes memcpy_ms publish_pool_ms ratio publish_heap_ms ratio pull_ms pull_GBps
 *   weights_bench [--bytes N]... [--reps R]   (PLEXUS_POOL_SIZE must hold 2 x the largest) */
#include <plexus/plexus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static int fail(const char* what) {
  fprintf(stderr, "weights_bench: %s: %s\n", what, plexus_get_last_error());
  return 1;
}

#define MAX_REPS 64

static int run(size_t bytes, int reps, uint64_t* version) {
  void* pooled = NULL;
  void* out = NULL;
  if (plexus_alloc(&pooled, bytes) != PLEXUS_SUCCESS) return fail("plexus_alloc (source)");
  if (plexus_alloc(&out, bytes) != PLEXUS_SUCCESS) return fail("plexus_alloc (pull)");
  char* heap = malloc(bytes);
  char* copy = malloc(bytes);
  if (heap == NULL || copy == NULL) return fail("malloc");
  memset(pooled, 1, bytes);
  memset(out, 0, bytes);
  memset(heap, 2, bytes);
  memset(copy, 0, bytes); /* the memcpy's destination, touched as the store's is not */
  char model[64];
  snprintf(model, sizeof model, "bench-%d-%zu", (int)getpid(), bytes);
  double t_copy[MAX_REPS], t_pool[MAX_REPS], t_heap[MAX_REPS], t_pull[MAX_REPS];
  for (int r = 0; r < reps; ++r) {
    double t0 = now_ms();
    memcpy(copy, heap, bytes);
    t_copy[r] = now_ms() - t0;
    plexus_weight_tensor_t from_pool = {"w", pooled, bytes};
    t0 = now_ms();
    if (plexus_weights_publish(model, ++*version, &from_pool, 1) != PLEXUS_SUCCESS) {
      return fail("publish from the pool");
    }
    t_pool[r] = now_ms() - t0;
    plexus_weight_tensor_t from_heap = {"w", heap, bytes};
    t0 = now_ms();
    if (plexus_weights_publish(model, ++*version, &from_heap, 1) != PLEXUS_SUCCESS) {
      return fail("publish from the heap");
    }
    t_heap[r] = now_ms() - t0;
    plexus_weight_tensor_t into = {"w", out, bytes};
    uint64_t got = 0;
    t0 = now_ms();
    if (plexus_weights_pull(model, 0, 0, 0, &into, 1, &got) != PLEXUS_SUCCESS) return fail("pull");
    t_pull[r] = now_ms() - t0;
    if (got != *version || ((const char*)out)[bytes - 1] != 2) {
      fprintf(stderr, "weights_bench: the pull copied version %llu, not %llu\n",
              (unsigned long long)got, (unsigned long long)*version);
      return 1;
    }
  }
  const double c = median(t_copy, reps), p = median(t_pool, reps), h = median(t_heap, reps),
               l = median(t_pull, reps);
  printf("%12zu %10.2f %15.2f %6.2f %15.2f %6.2f %8.2f %9.2f\n", bytes, c, p, p / c, h, h / c, l,
         (double)bytes / (l * 1e6));
  free(heap);
  free(copy);
  plexus_free(pooled);
  plexus_free(out);
  return 0;
}

int main(int argc, char** argv) {
  size_t sizes[16];
  int nsizes = 0, reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc && nsizes < 16) {
      sizes[nsizes++] = strtoull(argv[++i], NULL, 0);
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: weights_bench [--bytes N]... [--reps R (1..%d)]\n", MAX_REPS);
      return 2;
    }
  }
  for (int i = 0; i < nsizes; ++i) {
    if (sizes[i] < 8) {
      fprintf(stderr, "weights_bench: --bytes %zu: at least 8\n", sizes[i]);
      return 2;
    }
  }
  if (reps < 1 || reps > MAX_REPS) {
    fprintf(stderr, "weights_bench: --reps %d: 1 to %d\n", reps, MAX_REPS);
    return 2;
  }
  if (nsizes == 0) {
    sizes[nsizes++] = 256u << 20;
    sizes[nsizes++] = 1024u << 20;
  }
  printf("%12s %10s %15s %6s %15s %6s %8s %9s\n", "bytes", "memcpy_ms", "publish_pool_ms",
         "ratio", "publish_heap_ms", "ratio", "pull_ms", "pull_GBps");
  uint64_t version = 0;
  for (int i = 0; i < nsizes; ++i) {
    if (run(sizes[i], reps, &version) != 0) return 1;
  }
  return 0;
}
