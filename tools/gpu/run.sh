#!/usr/bin/env bash
# tools/gpu-check run BUNDLE OUT [--budget-s S] [--steps a,b] [--dry-run]: every GPU check
# from a bundle (tools/gpu-check bundle), on a machine that may have no package registry,
# Debian packages or build tree. Each step runs in its own process group under its own
# time limit, and is killed whole when it ends; the run stays within a total budget
# (default 500 s), so one call to a lent GPU machine fits its lease. A step's failure
# stops nothing after it. Writes under OUT: summary.txt (a line per step, as each ends),
# steps.log (every step's output), and logs.tar.gz at the end (the daemons' logs and the
# benchmarks' JSON), also when the run is interrupted. Without a GPU (or with --dry-run,
# which hides the GPUs from every step) the steps that need one are skipped, each saying
# why. --steps runs only the steps named (the summary's first column).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# A step in its own process: `run.sh __step NAME` with the run's environment exported.
if [ "${1:-}" = __step ]; then
  source "$here/steps.sh"
  "step_$2"
  exit $?
fi

# In the order they run; each: name, limit in seconds, what it needs (see missing()).
# The torch extension builds in the background from the first GPU test on and is waited
# for before the benchmarks, so that no compile runs beside a figure.
steps=(
  "environment 30 -"
  "no_kernel_symbols 30 -"
  "gpu_tests 150 -"
  "gpu_tests_collectives 150 -"
  "torch_ext_build 240 torch"
  "copy_engine_64mib 60 gpu"
  "allreduce_2r_cuda 45 gpu"
  "allreduce_2r_host 45 -"
  "allgather_2r_cuda 45 gpu"
  "allgather_2r_host 45 -"
  "no_kernel_in_clients 120 gpu,ncu"
  "ddp_cuda_plexus_nccl 120 gpu,torch,torch_ext"
  "ddp_cuda_image_nccl 120 gpu,torch"
  "torch_backend_cpu 200 torch,torch_ext"
  "weights_cuda 110 gpu,torch,torch_ext"
  "latency_8b_2r 40 cores"
  "latency_8b_2r_gloo 45 cores,torch"
  "allreduce_4r_cuda 45 gpu"
  "allreduce_4r_host 45 -"
  "allgather_4r_cuda 45 gpu"
  "allgather_4r_host 45 -"
  "allreduce_2r_cuda_kernel 45 gpu"
)

usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h | --help) usage; exit 0 ;; esac
[ $# -ge 2 ] || { usage >&2; exit 2; }
bundle=$1 out=$2
shift 2
budget_s=500 dry_run=0 only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --budget-s) budget_s=$2; shift ;;
    --dry-run) dry_run=1 ;;
    --steps) only=",$2,"; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "gpu-check run: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
[ -x "$bundle/bin/plexusd" ] || { echo "gpu-check run: $bundle is not a bundle (no bin/plexusd)" >&2; exit 2; }
known=",$(for s in "${steps[@]}"; do printf '%s,' "${s%% *}"; done)"
for name in ${only//,/ }; do
  [[ $known == *",$name,"* ]] || { echo "gpu-check run: no step $name (steps: ${known:1:-1})" >&2; exit 2; }
done
selected() { [ -z "$only" ] || [[ $only == *",$1,"* ]]; }
mkdir -p "$out" || exit 2
PX_BUNDLE=$(cd "$bundle" && pwd)
PX_OUT=$(cd "$out" && pwd)
PX_WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
export PX_BUNDLE PX_OUT PX_WORK
: >"$PX_OUT/summary.txt"
: >"$PX_OUT/steps.log"
deadline=$(($(date +%s) + budget_s))
ext_pid=""

# The logs go back even when the run is cut short; the extension's objects do not.
finish() {
  local pid
  [ -z "$ext_pid" ] || for pid in $(pgrep -f "__step torch_ext_build_bg"); do
    kill -KILL -- "-$(ps -o pgid= "$pid" | tr -d ' ')" 2>/dev/null
  done
  tar -C "$PX_WORK" --exclude='./torch-ext/obj' --exclude='*.so' -czf "$PX_OUT/logs.tar.gz" . 2>/dev/null
  rm -rf "$PX_WORK"
}
trap finish EXIT
trap 'exit 143' TERM INT

# The bundle's binaries find their libraries through their RUNPATH. Its fallback folder
# holds the C++ runtime it was built with, for a machine whose own is older: only then is
# it put on the library path.
if ! timeout 10 "$PX_BUNDLE/bin/plexusd" --help >/dev/null 2>&1; then
  export LD_LIBRARY_PATH=$PX_BUNDLE/lib/fallback${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export PLEXUS_AUTOSTART=0 PLEXUS_TEST_PLEXUSD=$PX_BUNDLE/bin/plexusd PYTHONUNBUFFERED=1
# A dry run on a machine with a GPU must not use it either.
[ $dry_run -eq 0 ] || export CUDA_VISIBLE_DEVICES=""

# What the machine lacks, once: each step names what it needs.
PX_NO_GPU=""
if [ $dry_run -eq 1 ]; then
  PX_NO_GPU="dry run (--dry-run)"
elif ! command -v nvidia-smi >/dev/null; then
  PX_NO_GPU="no nvidia-smi on this machine"
elif ! timeout 20 nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  PX_NO_GPU="nvidia-smi lists no GPU (or did not answer in 20 s)"
fi
PX_PYTHON="" PX_NO_TORCH="no Python with torch (python3, /usr/bin/python3)"
for p in ${PLEXUS_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && timeout 60 "$p" -c "import torch" >/dev/null 2>&1; then
    PX_PYTHON=$(command -v "$p") PX_NO_TORCH=""
    break
  fi
done
PX_NO_NCU=""
command -v ncu >/dev/null || PX_NO_NCU="ncu (Nsight Compute) is not on PATH"
PX_NO_CORES=""
[ "$(nproc)" -ge 4 ] || PX_NO_CORES="$(nproc) cores: the latency figure needs a core for the engine and one per rank"
export PX_NO_GPU PX_PYTHON PX_NO_TORCH PX_NO_NCU PX_NO_CORES

# needs: a comma-separated list of gpu torch ncu cores torch_ext (- for none); prints the
# first reason the machine cannot run the step, or nothing.
missing() {
  local need
  for need in ${1//,/ }; do
    case $need in
      gpu) [ -z "$PX_NO_GPU" ] || { echo "needs a GPU: $PX_NO_GPU"; return; } ;;
      torch) [ -z "$PX_NO_TORCH" ] || { echo "$PX_NO_TORCH"; return; } ;;
      ncu) [ -z "$PX_NO_NCU" ] || { echo "$PX_NO_NCU"; return; } ;;
      cores) [ -z "$PX_NO_CORES" ] || { echo "$PX_NO_CORES"; return; } ;;
      torch_ext) [ "$(cat "$PX_WORK/torch_ext_build.rc" 2>/dev/null)" = 0 ] ||
        { echo "the torch extension was not built (step torch_ext_build)"; return; } ;;
    esac
  done
}

record() { # NAME RESULT SECONDS DETAIL
  printf '%-28s %-7s %5ss  %s\n' "$1" "$2" "$3" "$4" | tee -a "$PX_OUT/summary.txt"
}

# Runs step_NAME (steps.sh) in a process group of its own, bounded by LIMIT_S and by what
# is left of the budget; the group is killed when it ends (nothing a step started
# outlives it). Prints the exit status: 124 or 137 when the limit stopped it.
bounded() { # LIMIT_S LOG NAME
  timeout -k 5 "$1" "$0" __step "$3" >"$2" 2>&1 &
  local pid=$! rc
  wait "$pid"
  rc=$?
  kill -KILL -- "-$pid" 2>/dev/null
  echo "$rc"
}

# step NAME LIMIT_S NEEDS: a step that exits 77 was skipped, its last line saying why.
step() {
  local name=$1 limit=$2 needs=$3 why left start rc took detail result
  selected "$name" || return 0
  why=$(missing "$needs")
  if [ -n "$why" ]; then record "$name" SKIP 0 "$why"; return; fi
  left=$((deadline - $(date +%s) - 5))
  if [ $left -lt 10 ]; then record "$name" SKIP 0 "the run's budget of ${budget_s} s is spent"; return; fi
  [ "$limit" -le "$left" ] || limit=$left
  start=$(date +%s)
  rc=$(bounded "$limit" "$PX_WORK/$name.log" "$name")
  took=$(($(date +%s) - start))
  case $rc in
    0) result=PASS ;;
    77) result=SKIP ;;
    124 | 137) result=TIMEOUT ;;
    *) result=FAIL ;;
  esac
  detail=$(grep -E '^(FIGURE|SKIP|FAIL)' "$PX_WORK/$name.log" | head -4 | sed 's/^FIGURE //' | paste -sd ';' -)
  [ "$result" != TIMEOUT ] || detail="stopped after ${limit} s; ${detail}"
  [ -n "$detail" ] || detail=$(tail -1 "$PX_WORK/$name.log" | cut -c1-160)
  { echo "===== $name: $result (exit $rc, ${took} s, limit ${limit} s)"; cat "$PX_WORK/$name.log"; } >>"$PX_OUT/steps.log"
  record "$name" "$result" "$took" "$detail"
}

# The extension's build, in the background: its own process group, its log and status
# left for its step, which waits for it.
start_torch_ext_build() {
  selected torch_ext_build && [ -z "$(missing torch)" ] || return 0
  (
    rc=$(bounded 230 "$PX_WORK/torch_ext_build.bg" torch_ext_build_bg)
    echo "$rc" >"$PX_WORK/torch_ext_build.rc"
  ) &
  ext_pid=$!
}

echo "gpu-check run: bundle $PX_BUNDLE, results in $PX_OUT, budget ${budget_s} s" | tee -a "$PX_OUT/summary.txt"
[ -z "$PX_NO_GPU" ] || echo "gpu-check run: no GPU steps: $PX_NO_GPU" | tee -a "$PX_OUT/summary.txt"
for s in "${steps[@]}"; do
  read -r name limit needs <<<"$s"
  [ "$name" != gpu_tests ] || start_torch_ext_build
  step "$name" "$limit" "$needs"
done

failed=$(grep -cE '^[a-z0-9_]+ +(FAIL|TIMEOUT) ' "$PX_OUT/summary.txt")
echo "gpu-check run: $failed step(s) failed or timed out; logs in $PX_OUT" | tee -a "$PX_OUT/summary.txt"
echo
echo "== summary"
cat "$PX_OUT/summary.txt"
[ "$failed" -eq 0 ]
