/* One process of a weight store across nodes, for tests/cluster/weights_cluster_test.sh and
 * tools/bench/weights_cluster.sh: the trainer's side (a key, a publish) or a rollout's (a
 * subscription, a pull checked byte for byte). Version v's one tensor "w": byte i is
 * (i * 31 + v) mod 256. Each line it prints ends with CLOCK_REALTIME in ms (one clock for
 * every namespace node).
 *   weights_node key --model M --out FILE
 *   weights_node publish --model M --bytes N --version V [--count C --go PREFIX]
 *   weights_node pull --model M --bytes N [--after A] [--key FILE] [--timeout-s S] [--count C]
 * With --count, one process publishes versions V..V+C-1 from the same buffer, each once the
 * file PREFIX<v> exists (as a trainer publishes every step), or pulls C versions in turn, each
 * newer than the one before, into the same buffer, touched before the first (as a rollout's
 * loaded weights are). Exit 0, or 1 with the library's sentence. */
#include <plexus/plexus.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int fail(const char* what) {
  fprintf(stderr, "weights_node: %s: %s\n", what, plexus_get_last_error());
  return 1;
}

static void fill(unsigned char* p, size_t n, uint64_t v) {
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i * 31 + v);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  const char *model = NULL, *out = NULL, *key_file = NULL;
  size_t bytes = 0;
  uint64_t version = 0, after = 0, count = 1;
  const char* go = NULL;
  int timeout_s = 120;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--model") == 0)
      model = argv[i + 1];
    else if (strcmp(argv[i], "--out") == 0)
      out = argv[i + 1];
    else if (strcmp(argv[i], "--key") == 0)
      key_file = argv[i + 1];
    else if (strcmp(argv[i], "--bytes") == 0)
      bytes = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--version") == 0)
      version = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--after") == 0)
      after = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--timeout-s") == 0)
      timeout_s = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--count") == 0)
      count = strtoull(argv[i + 1], NULL, 0);
    else if (strcmp(argv[i], "--go") == 0)
      go = argv[i + 1];
  }
  if (model == NULL) {
    fprintf(stderr, "usage: weights_node key|publish|pull --model M ... (see the file's head)\n");
    return 2;
  }
  if (strcmp(mode, "key") == 0) {
    plexus_unique_id_t key;
    if (out == NULL) return 2;
    if (plexus_weights_key(model, &key) != PLEXUS_SUCCESS) return fail("key");
    FILE* f = fopen(out, "wb");
    if (f == NULL || fwrite(&key, sizeof key, 1, f) != 1 || fclose(f) != 0)
      return fail("write key");
    return 0;
  }
  if (bytes == 0 || count == 0 || (count > 1 && strcmp(mode, "publish") == 0 && go == NULL))
    return 2;
  void* buf = NULL;
  if (plexus_alloc(&buf, bytes) != PLEXUS_SUCCESS) return fail("plexus_alloc");
  plexus_weight_tensor_t t = {"w", buf, bytes};
  if (strcmp(mode, "publish") == 0) {
    for (uint64_t v = version; v < version + count; ++v) {
      if (go != NULL) { /* the caller's sign, within the timeout */
        char path[4096];
        snprintf(path, sizeof path, "%s%llu", go, (unsigned long long)v);
        int waited_ms = 0;
        while (access(path, F_OK) != 0) {
          if (waited_ms >= timeout_s * 1000) {
            fprintf(stderr, "weights_node: no %s within %d s\n", path, timeout_s);
            return 1;
          }
          usleep(10000);
          waited_ms += 10;
        }
      }
      fill(buf, bytes, v);
      const double start = now_ms();
      if (plexus_weights_publish(model, v, &t, 1) != PLEXUS_SUCCESS) return fail("publish");
      printf("published %llu stall_ms %.1f at %.1f\n", (unsigned long long)v, now_ms() - start,
             start);
      fflush(stdout);
    }
    return 0;
  }
  if (strcmp(mode, "pull") == 0) {
    if (key_file != NULL) {
      plexus_unique_id_t key;
      FILE* f = fopen(key_file, "rb");
      if (f == NULL || fread(&key, sizeof key, 1, f) != 1) return fail("read key");
      fclose(f);
      if (plexus_weights_subscribe(&key, model) != PLEXUS_SUCCESS) return fail("subscribe");
    }
    memset(buf, 0, bytes);
    for (uint64_t n = 0; n < count; ++n) {
      uint64_t got = 0;
      if (plexus_weights_pull(model, 0, after, (int64_t)timeout_s * 1000, &t, 1, &got) !=
          PLEXUS_SUCCESS) {
        return fail("pull");
      }
      const double at = now_ms();
      const unsigned char* p = buf;
      for (size_t i = 0; i < bytes; ++i) {
        if (p[i] != (unsigned char)(i * 31 + got)) {
          fprintf(stderr, "weights_node: byte %zu of version %llu is wrong\n", i,
                  (unsigned long long)got);
          return 1;
        }
      }
      printf("pulled %llu at %.1f\n", (unsigned long long)got, at);
      fflush(stdout);
      after = got;
    }
    return 0;
  }
  return 2;
}
