#!/usr/bin/env bash
# tools/gpu-check run BUNDLE OUT [--budget-s S] [--steps a,b] [--dry-run]: every GPU check from a bundle
# (tools/gpu-check bundle), on a machine that may have no package registry, Debian
# packages or build tree. Each step runs under its own time limit and the run under a
# total budget (default 500 s), so one call to a lent GPU machine fits its lease. A step's
# failure stops nothing after it. Writes under OUT: summary.txt (a line per step, as each
# ends), steps.log (every step's output), figures as JSON, and logs.tar.gz at the end.
# Without a GPU (or with --dry-run) the steps that need one are skipped, each saying why.
# --steps runs only the steps named (their names are the summary's first column).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# A step in its own process (so that `timeout` can bound it and kill what it started):
# `run.sh __step NAME` with the run's environment exported.
if [ "${1:-}" = __step ]; then
  source "$here/steps.sh"
  "step_$2"
  exit $?
fi

usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
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
mkdir -p "$out" || exit 2
PX_BUNDLE=$(cd "$bundle" && pwd)
PX_OUT=$(cd "$out" && pwd)
PX_WORK=$(mktemp -d /tmp/gpu-check.XXXXXX)
export PX_BUNDLE PX_OUT PX_WORK
: >"$PX_OUT/summary.txt"
: >"$PX_OUT/steps.log"
deadline=$(($(date +%s) + budget_s))

# The bundle's libraries first. Its fallback folder holds the C++ runtime it was built
# with, used only where the machine's own is older.
export LD_LIBRARY_PATH=$PX_BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ! "$PX_BUNDLE/bin/plexusd" --help >/dev/null 2>&1; then
  export LD_LIBRARY_PATH=$PX_BUNDLE/lib:$PX_BUNDLE/lib/fallback${LD_LIBRARY_PATH#"$PX_BUNDLE/lib"}
fi
export PLEXUS_AUTOSTART=0 PLEXUS_TEST_PLEXUSD=$PX_BUNDLE/bin/plexusd PYTHONUNBUFFERED=1

# What the machine lacks, once: each step names what it needs.
PX_NO_GPU=""
if [ $dry_run -eq 1 ]; then
  PX_NO_GPU="dry run (--dry-run)"
elif ! command -v nvidia-smi >/dev/null; then
  PX_NO_GPU="no nvidia-smi on this machine"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  PX_NO_GPU="nvidia-smi lists no GPU"
fi
PX_PYTHON="" PX_NO_TORCH="no Python with torch (python3, /usr/bin/python3)"
for p in ${PLEXUS_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import torch" >/dev/null 2>&1; then
    PX_PYTHON=$(command -v "$p") PX_NO_TORCH=""
    break
  fi
done
PX_NO_NCU=""
command -v ncu >/dev/null || PX_NO_NCU="ncu (Nsight Compute) is not on PATH"
PX_NO_CORES=""
[ "$(nproc)" -ge 4 ] || PX_NO_CORES="$(nproc) cores: the latency figure needs a core for the engine and one per rank"
export PX_NO_GPU PX_PYTHON PX_NO_TORCH PX_NO_NCU PX_NO_CORES

# needs: a space-separated list of gpu torch ncu cores torch_ext; prints the first reason
# the machine cannot run the step, or nothing.
missing() {
  local need
  for need in $1; do
    case $need in
      gpu) [ -z "$PX_NO_GPU" ] || { echo "needs a GPU: $PX_NO_GPU"; return; } ;;
      torch) [ -z "$PX_NO_TORCH" ] || { echo "$PX_NO_TORCH"; return; } ;;
      ncu) [ -z "$PX_NO_NCU" ] || { echo "$PX_NO_NCU"; return; } ;;
      cores) [ -z "$PX_NO_CORES" ] || { echo "$PX_NO_CORES"; return; } ;;
      torch_ext) ls "$PX_WORK"/torch-ext/plexus_torch*.so >/dev/null 2>&1 ||
        { echo "the torch extension was not built (step torch_ext_build)"; return; } ;;
    esac
  done
}

record() { # NAME RESULT SECONDS DETAIL
  printf '%-28s %-7s %5ss  %s\n' "$1" "$2" "$3" "$4" | tee -a "$PX_OUT/summary.txt"
}

# step NAME LIMIT_S NEEDS: runs step_NAME (steps.sh) bounded by LIMIT_S and by what is left
# of the budget; a step that exits 77 was skipped, its last line saying why.
step() {
  local name=$1 limit=$2 needs=$3 why left start rc took detail result
  [ -z "$only" ] || [[ $only == *",$name,"* ]] || return 0
  why=$(missing "$needs")
  if [ -n "$why" ]; then record "$name" SKIP 0 "$why"; return; fi
  left=$((deadline - $(date +%s) - 5))
  if [ $left -lt 10 ]; then record "$name" SKIP 0 "the run's budget of ${budget_s} s is spent"; return; fi
  [ "$limit" -le "$left" ] || limit=$left
  start=$(date +%s)
  timeout -k 5 "$limit" "$0" __step "$name" >"$PX_WORK/$name.log" 2>&1
  rc=$?
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

echo "gpu-check run: bundle $PX_BUNDLE, results in $PX_OUT, budget ${budget_s} s" | tee -a "$PX_OUT/summary.txt"
[ -z "$PX_NO_GPU" ] || echo "gpu-check run: no GPU steps: $PX_NO_GPU" | tee -a "$PX_OUT/summary.txt"

# The torch extension builds on its own cores while the GPU steps run; its step waits.
(
  [ -z "$only" ] || [[ $only == *,torch_ext_build,* ]] || exit 0
  why=$(missing torch)
  if [ -n "$why" ]; then echo "SKIP $why" >"$PX_WORK/torch_ext_build.bg"; echo 77 >"$PX_WORK/torch_ext_build.rc"; exit; fi
  timeout -k 5 300 nice "$0" __step torch_ext_build_bg >"$PX_WORK/torch_ext_build.bg" 2>&1
  echo $? >"$PX_WORK/torch_ext_build.rc"
) &
ext_pid=$!

step environment 30 ""
step no_kernel_symbols 30 ""
step gpu_tests 150 ""
step copy_engine_64mib 60 gpu
step allreduce_2r_cuda 45 gpu
step allreduce_2r_host 45 ""
step allgather_2r_cuda 45 gpu
step allgather_2r_host 45 ""
step no_kernel_in_clients 120 "gpu ncu"
# Its build is bounded (300 s); the wait for it is bounded by what is left of the budget.
while [ ! -f "$PX_WORK/torch_ext_build.rc" ] && [ $(($(date +%s) + 60)) -lt $deadline ] &&
  kill -0 $ext_pid 2>/dev/null; do
  sleep 1
done
step torch_ext_build 5 torch
step ddp_cuda_plexus_nccl 90 "gpu torch torch_ext"
step ddp_cuda_image_nccl 90 "gpu torch"
step torch_backend_cpu 90 "torch torch_ext"
step latency_8b_2r 40 "cores"
step latency_8b_2r_gloo 40 "cores torch"
step gpu_tests_collectives 150 ""
step allreduce_4r_cuda 45 gpu
step allreduce_4r_host 45 ""
step allgather_4r_cuda 45 gpu
step allgather_4r_host 45 ""
step allreduce_2r_cuda_kernel 45 gpu

tar -C "$PX_WORK" -czf "$PX_OUT/logs.tar.gz" . 2>/dev/null
failed=$(grep -cE '^[a-z0-9_]+ +(FAIL|TIMEOUT) ' "$PX_OUT/summary.txt")
echo "gpu-check run: $failed step(s) failed or timed out; logs in $PX_OUT" | tee -a "$PX_OUT/summary.txt"
echo
echo "== summary"
cat "$PX_OUT/summary.txt"
rm -rf "$PX_WORK"
[ "$failed" -eq 0 ]
