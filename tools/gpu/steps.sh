# The steps of tools/gpu-check run (run.sh), one function each, sourced in the step's own
# process. They read PX_BUNDLE, PX_WORK, PX_PYTHON (run.sh exports them), write what they
# saw to stdout, and name their figures on lines that begin FIGURE (run.sh puts those in
# the summary). Exit 0: passed; 77: skipped, the last line saying why; else failed.
# shellcheck shell=bash
set -uo pipefail
bin=$PX_BUNDLE/bin
tools=$PX_BUNDLE/tools

# Python as the machine has it (the bundle's libraries reach the extension through
# RUNPATHs, not the library path), with the Python stack (faulthandler) and the native one
# (lib/diag/libcrash_trace.so) of a rank that dies of a signal. PY_PRELOAD: libraries to
# preload before the tracer; PY_TIMEOUT: seconds after which the run is killed.
pyrun() {
  PYTHONFAULTHANDLER=1 LD_PRELOAD="${PY_PRELOAD:+$PY_PRELOAD:}$PX_BUNDLE/lib/diag/libcrash_trace.so" \
    ${PY_TIMEOUT:+timeout -k 5 "$PY_TIMEOUT"} "$PX_PYTHON" "$@"
}

# torch's libtorch_cuda.so, and the nccl* symbols it imports that our libnccl.so.2 lacks
# (each would stop torch from loading over ours).
torch_cuda_lib() {
  "$PX_PYTHON" -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))'
}
nccl_symbols_ours_lacks() {
  local lib
  lib=$(torch_cuda_lib)
  [ -f "$lib" ] || return 0
  comm -23 <(nm -D --undefined-only "$lib" | awk '$NF ~ /^nccl/ {print $NF}' | sort -u) \
    <(nm -D --defined-only "$PX_BUNDLE/lib/nccl/libnccl.so.2" | awk '$NF ~ /^nccl/ {print $NF}' | sort -u) |
    paste -sd ' ' -
}

# A plexusd of the step's own in DIR, stopped when the step ends. Sets daemon_pid.
# DAEMON_PREFIX: a command to start it under (taskset -c 1).
daemons=()
stop_daemons() {
  local pid
  for pid in "${daemons[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${daemons[@]}"; do wait "$pid" 2>/dev/null; done
}
trap stop_daemons EXIT
start_daemon() { # DIR [plexusd options]
  local dir=$1
  shift
  mkdir -p "$dir"
  # shellcheck disable=SC2086
  ${DAEMON_PREFIX:-} "$bin/plexusd" --socket "$dir/plexusd.sock" --metrics off "$@" >"$dir/plexusd.log" 2>&1 &
  daemon_pid=$!
  daemons+=("$daemon_pid")
  wait_socket "$dir/plexusd.sock" 100 || { echo "FAIL plexusd did not start:"; cat "$dir/plexusd.log"; exit 1; }
}
wait_socket() { # PATH TENTHS_OF_A_SECOND
  local i
  for ((i = 0; i < $2; i++)); do
    [ -S "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# gtest's own counts, as a FIGURE line; exit 77 where every test skipped (no GPU).
gtest_step() { # FILTER
  local log=$PX_WORK/gtest-$$.out
  mkdir -p "$PX_WORK/gtest" && cd "$PX_WORK/gtest" || exit 1
  "$bin/plexus_gpu_test" --gtest_filter="$1" --gtest_output="xml:$PX_WORK/gtest-${1//[^A-Za-z]/_}.xml" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]} passed skipped failed
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log")
  skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log")
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log")
  echo "FIGURE ${passed:-0} passed, ${skipped:-0} skipped, ${failed:-0} failed"
  if [ "$rc" -eq 0 ] && [ "${passed:-0}" -eq 0 ] && [ "${skipped:-0}" -gt 0 ]; then
    echo "SKIP every test skipped itself: $(grep -m1 -o 'needs a GPU.*' "$log")"
    exit 77
  fi
  return "$rc"
}

# plexus-bench from 1 KiB to 64 MiB; the 64 MiB row's busbw as the figure.
bench_step() { # COLLECTIVE RANKS DEVICE [more plexus-bench options]
  local coll=$1 ranks=$2 device=$3 json=$PX_WORK/$1-$2r-$3.json
  shift 3
  "$bin/plexus-bench" --spawn "$ranks" --device "$device" -C "$coll" -b 1K -e 64M -f 4 -n 20 -w 5 \
    -J "$json" "$@" 2>&1 | tee "$PX_WORK/bench-$$.out"
  local rc=${PIPESTATUS[0]}
  awk '$1 == 67108864 { printf "FIGURE 64 MiB busbw %s GB/s out of place, %s in place; wrong %s/%s\n", $8, $12, $9, $13 }' \
    "$PX_WORK/bench-$$.out"
  return "$rc"
}

step_environment() {
  uname -a
  echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  ldd --version 2>&1 | head -1
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi
    nvidia-smi topo -m 2>&1 | head -5
  fi
  for tool in ncu compute-sanitizer nvcc g++ cmake ninja nm; do
    printf '%s: %s\n' "$tool" "$( (command -v "$tool" && "$tool" --version 2>&1 | tail -1) | paste -sd ' ' -)"
  done
  local figure
  figure="$(nproc) cores, kernel $(uname -r)"
  if command -v nvidia-smi >/dev/null; then
    figure="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | sed 's/, / driver /'), $figure"
  fi
  if [ -n "$PX_PYTHON" ]; then
    local version
    version=$("$PX_PYTHON" - <<'PY'
import sys, sysconfig, os, torch
print("python", sys.version.split()[0], sys.executable, file=sys.stderr)
print("torch", torch.__version__, "cuda", torch.version.cuda, "cxx11 abi",
      torch.compiled_with_cxx11_abi(), file=sys.stderr)
print("Python.h", os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
      file=sys.stderr)
if torch.cuda.is_available():
    print("torch's NCCL", torch.cuda.nccl.version(), "device", torch.cuda.get_device_name(0),
          file=sys.stderr)
print(torch.__version__)
PY
    )
    figure="$figure, torch $version"
    command -v nm >/dev/null && echo "nccl symbols torch imports that our libnccl.so.2 lacks: $(nccl_symbols_ours_lacks)"
  fi
  echo "FIGURE $figure"
}

step_no_kernel_symbols() {
  bash "$tools/libplexus_no_kernels_test.sh" "$PX_BUNDLE/lib/libplexus.so.0" "$PX_BUNDLE/src"
}

step_gpu_tests() { gtest_step '-GpuCollectivesTest.*'; }
step_gpu_tests_collectives() { gtest_step 'GpuCollectivesTest.*'; }

step_copy_engine_64mib() {
  "$bin/gpu_copy_bench" --mib 64 | tee "$PX_WORK/copy.out"
  local rc=${PIPESTATUS[0]}
  awk 'NF == 4 && $4 ~ /^[0-9.]+$/ { printf "FIGURE %s %.0f%% of cuMemcpy (%s vs %s GB/s)\n", $1, $4 * 100, $2, $3 }' "$PX_WORK/copy.out"
  return "$rc"
}

step_allreduce_2r_cuda() { bench_step allreduce 2 cuda; }
step_allreduce_2r_host() { bench_step allreduce 2 host; }
step_allgather_2r_cuda() { bench_step allgather 2 cuda; }
step_allgather_2r_host() { bench_step allgather 2 host; }
step_allreduce_4r_cuda() { bench_step allreduce 4 cuda; }
step_allreduce_4r_host() { bench_step allreduce 4 host; }
step_allgather_4r_cuda() { bench_step allgather 4 cuda; }
step_allgather_4r_host() { bench_step allgather 4 host; }

# plexusd's own reduction kernel for allreduces of 1 MiB or more.
step_allreduce_2r_cuda_kernel() {
  start_daemon "$PX_WORK/kernel" --gpu-reduce-kernel-bytes 1048576
  bench_step allreduce 2 cuda --socket "$PX_WORK/kernel/plexusd.sock" --no-embedded
  local rc=$?
  grep -E "reduction kernel|not reduced on the GPU" "$PX_WORK/kernel/plexusd.log" | head -5
  return $rc
}

# No kernel in the clients: ncu follows the bench and its rank processes (a daemon outside
# ncu does the copies) and must profile none. The same ncu over plexusd with its reduction
# kernel on must see that kernel, or the first look proves nothing.
step_no_kernel_in_clients() {
  local d=$PX_WORK/ncu-clients c=$PX_WORK/ncu-daemon
  start_daemon "$d"
  local coll rc bad=0
  for coll in allreduce allgather; do
    ncu --target-processes all --print-summary none "$bin/plexus-bench" --spawn 2 \
      --socket "$d/plexusd.sock" --no-embedded --device cuda -C "$coll" -b 4M -e 4M -n 5 -w 1 \
      >"$d/$coll.log" 2>&1
    rc=$?
    echo "-- clients under ncu ($coll): exit $rc"
    cat "$d/$coll.log"
    [ $rc -eq 0 ] || bad=1
  done
  local attached kernels
  attached=$(cat "$d"/all*.log | grep -c '==PROF== Connected to process')
  kernels=$(cat "$d"/all*.log | grep -c '==PROF== Profiling')

  mkdir -p "$c"
  ncu --target-processes all --print-summary none -c 3 "$bin/plexusd" --socket "$c/plexusd.sock" \
    --metrics off --gpu-reduce-kernel-bytes 1048576 >"$c/ncu.log" 2>&1 &
  local ncu_pid=$!
  daemons+=("$ncu_pid")
  if wait_socket "$c/plexusd.sock" 300; then
    "$bin/plexus-bench" --spawn 2 --socket "$c/plexusd.sock" --no-embedded --device cuda \
      -C allreduce -b 4M -e 4M -n 3 -w 1 -c 1
    local pid
    for pid in $(pgrep -x plexusd); do
      grep -q "$c/plexusd.sock" "/proc/$pid/cmdline" 2>/dev/null && kill "$pid"
    done
  else
    echo "plexusd under ncu did not come up in 30 s"
  fi
  local i
  for ((i = 0; i < 300; i++)); do kill -0 "$ncu_pid" 2>/dev/null || break; sleep 0.1; done
  echo "-- plexusd under ncu (the positive control)"
  cat "$c/ncu.log"
  local daemon_kernels
  daemon_kernels=$(grep -c '==PROF== Profiling' "$c/ncu.log")
  echo "FIGURE clients: $kernels kernel(s) in $attached process(es) ncu attached to; plexusd with its kernel on: $daemon_kernels kernel(s) seen"
  if [ $bad -ne 0 ]; then echo "FAIL a bench under ncu failed: its kernels were not all seen"; return 1; fi
  if [ "$attached" -eq 0 ]; then echo "FAIL ncu attached to no client process"; return 1; fi
  if [ "$kernels" -ne 0 ]; then echo "FAIL a client process launched a kernel"; return 1; fi
  if [ "$daemon_kernels" -eq 0 ]; then echo "FAIL ncu saw no kernel of plexusd's either: the check cannot tell"; return 1; fi
}

step_torch_ext_build_bg() {
  bash "$tools/build_torch_ext.sh" "$PX_PYTHON" "$PX_BUNDLE" "$PX_WORK/torch-ext"
}
# Waits for the background build (run.sh starts it; it is bounded on its own).
step_torch_ext_build() {
  while [ ! -f "$PX_WORK/torch_ext_build.rc" ]; do sleep 1; done
  cat "$PX_WORK/torch_ext_build.bg"
  return "$(cat "$PX_WORK/torch_ext_build.rc")"
}

# DDP on CUDA tensors, 2 ranks on the one GPU, backend cpu:plexus,cuda:nccl: with our
# libnccl.so.2 preloaded, then on the image's own NCCL.
step_ddp_cuda_plexus_nccl() {
  start_daemon "$PX_WORK/ddp"
  local ours=$PX_BUNDLE/lib/nccl/libnccl.so.2 preload lacking theirs
  preload=$ours
  # A symbol torch links that ours lacks would stop torch from loading at all: then the
  # image's NCCL is preloaded behind ours for those alone, and the step says so.
  lacking=$(nccl_symbols_ours_lacks)
  if [ -n "$lacking" ]; then
    theirs=$(ldd "$(torch_cuda_lib)" | awk '/libnccl.so.2 => \// {print $3}')
    [ -n "$theirs" ] || { echo "FAIL ours lacks what torch links ($lacking), and torch's own NCCL was not found"; return 1; }
    echo "FIGURE ours lacks what torch links: $lacking; preloading $theirs behind ours for those"
    preload=$ours:$theirs
  fi
  PLEXUS_SOCKET=$PX_WORK/ddp/plexusd.sock PY_PRELOAD=$preload PYTHONPATH=$PX_WORK/torch-ext \
    pyrun "$tools/ddp_cuda.py" 2 --expect-nccl "$PX_BUNDLE/lib/nccl" --require-plexus --deadline-s 90
  local rc=$?
  # What plexusd carried: DDP's gradient allreduces came through our libnccl (the CPU
  # backend only gathered the parameters at the end).
  echo "-- plexusctl jobs after the run"
  "$bin/plexusctl" --socket "$PX_WORK/ddp/plexusd.sock" jobs
  return $rc
}
step_ddp_cuda_image_nccl() {
  local ext=""
  [ "$(cat "$PX_WORK/torch_ext_build.rc" 2>/dev/null)" = 0 ] && ext=$PX_WORK/torch-ext
  start_daemon "$PX_WORK/ddp-image"
  export PLEXUS_SOCKET=$PX_WORK/ddp-image/plexusd.sock PYTHONPATH=$ext
  pyrun "$tools/ddp_cuda.py" 2 --deadline-s 50 2>&1 | tee "$PX_WORK/ddp-image.out"
  [ "${PIPESTATUS[0]}" -ne 0 ] || return 0
  # NCCL refuses two ranks of one communicator on one GPU; its figure is then one rank's.
  grep -q "Duplicate GPU" "$PX_WORK/ddp-image.out" || return 1
  echo "FIGURE NCCL refuses 2 ranks on one GPU (Duplicate GPU detected); 1 rank instead:"
  pyrun "$tools/ddp_cuda.py" 1 --deadline-s 50
}

# The weight store on CUDA tensors (1 GiB in 8 tensors published and pulled by plexusd's
# copy engines, exact), beside torch's own copies of the same bytes.
step_weights_cuda() {
  start_daemon "$PX_WORK/weights"
  PLEXUS_SOCKET=$PX_WORK/weights/plexusd.sock PYTHONPATH=$PX_WORK/torch-ext PY_TIMEOUT=100 \
    pyrun -W ignore "$tools/weights_cuda.py" --bytes $((1 << 30)) --versions 5
}

# The backend's own test cases against torch 2.x, on CPU tensors.
step_torch_backend_cpu() {
  start_daemon "$PX_WORK/torch-cpu"
  export PLEXUS_SOCKET=$PX_WORK/torch-cpu/plexusd.sock PYTHONPATH=$PX_WORK/torch-ext
  local status=0 c
  for c in "collectives 2" "pool 2" "ddp 2" "failures 4" "recovery 3" "coalesced 2"; do
    echo "== $c"
    # shellcheck disable=SC2086
    PY_TIMEOUT=120 pyrun -W ignore "$tools/torch_backend_test.py" $c ||
      { status=1; echo "FAIL torch_backend_test.py $c"; }
  done
  [ $status -ne 0 ] || echo "FIGURE torch_backend_test.py collectives 2, pool 2, ddp 2, failures 4, recovery 3, coalesced 2: every case ok"
  return $status
}

# 8 B allreduce, 2 ranks, with a core for the engine: plexusd pinned to core 1 and spinning,
# the ranks to cores 2 and 3 spinning; then the same on gloo through torch (the peer).
step_latency_8b_2r() {
  command -v taskset >/dev/null || { echo "SKIP no taskset on this machine: nothing to pin with"; exit 77; }
  DAEMON_PREFIX="taskset -c 1" start_daemon "$PX_WORK/lat" --spin-us 1000000
  local ranks
  for ranks in 1 2; do
    PLEXUS_SPIN_US=1000000 taskset -c 2,3 "$bin/plexus-bench" --socket "$PX_WORK/lat/plexusd.sock" --no-embedded \
      -C allreduce --spawn "$ranks" -b 8 -e 8 -n 3000 -w 200 --stat median | tee "$PX_WORK/lat-$ranks.out" ||
      return 1
    awk -v r="$ranks" '$1 == 8 { printf "FIGURE %d rank(s): median %s us\n", r, $6 }' "$PX_WORK/lat-$ranks.out"
  done
}
step_latency_8b_2r_gloo() {
  command -v taskset >/dev/null || { echo "SKIP no taskset on this machine: nothing to pin with"; exit 77; }
  taskset -c 2,3 "$PX_PYTHON" "$tools/latency_gloo.py" 2 3000 200
}
