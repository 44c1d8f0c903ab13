#!/usr/bin/env bash
# The whole test suite: install what is missing, build with warnings as errors, run
# ctest. --sanitize also builds and runs everything under AddressSanitizer + UBSan
# (what CI does). --label L runs only tests labelled L (unit, integration, ...).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=0
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) sanitize=1 ;;
    --label) ctest_args+=(-L "$2"); shift ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

"$root/tools/install-deps.sh"

run_suite() {
  local build=$1; shift
  # Ninja keeps both cores busy to the end where Make waits per directory (the ASan build:
  # 420 s against 500 s). A build directory made earlier with another generator keeps it:
  # cmake refuses to switch one.
  local generator=
  if [ -f "$build/CMakeCache.txt" ]; then
    generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt")
  fi
  generator=${generator:-${CMAKE_GENERATOR:-Ninja}}
  echo "== configure $build ($generator $*)"
  # A unity build (several sources per compiler run) parses the big headers (Cap'n Proto,
  # spdlog, gtest) once per batch: about half the build time on 2 cores. Plain builds
  # (a developer's) still compile every file alone, so a missing include shows there.
  cmake -S "$root" -B "$build" -G "$generator" -DPLEXUS_WERROR=ON -DCMAKE_UNITY_BUILD=ON \
    -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 "$@" >/dev/null
  echo "== build $build"
  cmake --build "$build" -j "$(nproc)"
  echo "== ctest $build"
  (cd "$build" && ctest --output-on-failure --timeout 900 "${ctest_args[@]}")
}

# The /usr prefix: the packaging test builds the Debian packages from this build. -g1 for
# the C++ of both legs: line tables (what a backtrace and a sanitizer report need) without
# the variables' descriptions, which cost a fifth of the compile time; a build directory
# this script configured keeps it (configure your own for a debugger).
run_suite "${PLEXUS_BUILD_DIR:-$root/build}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
if [ "$sanitize" -eq 1 ]; then
  # halt_on_error: the first report fails the test that caused it.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
  # Built without CUDA: this leg also shows that everything but the GPU path builds and
  # passes without it (the first leg builds the CUDA code wherever nvcc is installed).
  # -O1, as the sanitizers' authors advise: -O0 made the collective tests several times
  # slower for no more findings. The long multi-namespace scripts (the 32-node scale test
  # among them), the VM cluster and the job-sharing rates run in the first leg only (CI's
  # 30 minutes on 2 cores; ASan daemons in emulated VMs run several times over the path
  # timeouts the test holds them to, and cannot fill a 400 Mbit/s link on 2 cores); under
  # ASan the in-process
  # multi-node tests, the failover script, the RDMA path between VMs and everything else
  # run.
  # The packages are built once, from the first leg's release build; the benchmarks of
  # tools/bench too (no test runs them).
  ctest_args+=(-E '^(cluster_(multinode|slow_path|slow_node|job_share|scale)|rdma_cluster|packaging)$')
  run_suite "$root/build-asan" -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1 -O1" \
    -DPLEXUS_SANITIZE=ON -DPLEXUS_BUILD_BENCH=OFF -DPLEXUS_WITH_CUDA=OFF
fi
