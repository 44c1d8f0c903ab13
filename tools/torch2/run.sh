#!/usr/bin/env bash
# tools/torch2/run.sh BUILD [--root DIR] [--cases "CASE N ..."] [--suite]
# The torch extension against torch 2.x on this machine. Debian 12 ships torch 1.13, which CI
# builds and tests against; Debian sid ships torch 2.x (2.14 when this was written). This:
#  1. makes, once, a sid chroot at DIR (default /var/tmp/plexus-torch2: about 2.5 GB and a few
#     minutes from Debian's registry) with python3-torch, g++ and Python's headers;
#  2. builds plexus_torch in it against that torch from BUILD's libplexus, with
#     tools/gpu/build_torch_ext.sh, as on a lent GPU machine;
#  3. starts BUILD's plexusd out here with its socket inside the chroot, and runs
#     tests/python/torch_backend_test.py's cases with the chroot's Python (default: one of
#     each kind, the "cases" line below; --cases "NAME N;NAME N" picks others, "" none); with
#     --suite also PyTorch's own distributed suite (tests/python/torch_distributed_suite.py),
#     plexus then gloo, in the same run.
# Needs root, debootstrap and Debian's registry; not part of CI (the chroot's size). Exits 77,
# saying why, without root or debootstrap; fails if making the chroot fails. Unmounts and
# stops what it started, also on failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -ge 1 ] || { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
build=$(cd "$1" && pwd)
shift
root=/var/tmp/plexus-torch2 suite=0
cases="collectives 2;pool 2;ddp 2;failures 4;timeout 2;recovery 3;coalesced 2"
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=${2:?--root needs a folder}; shift ;;
    --cases) cases=${2?--cases needs a list}; shift ;;
    --suite) suite=1 ;;
    *) echo "torch2/run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot and bind mounts)"
[ -x "$build/daemon/plexusd" ] && [ -e "$build/clientlib/libplexus.so.0" ] ||
  { echo "FAIL: $build has no daemon/plexusd or clientlib/libplexus.so.0 (build it first)"; exit 1; }
if grep -q '^PLEXUS_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  skip "$build is a sanitizer build: the chroot's Python cannot load an instrumented libplexus"
fi

if [ ! -x "$root/usr/bin/apt-get" ]; then
  command -v debootstrap >/dev/null || skip "no debootstrap (apt-get install debootstrap) to make the sid chroot"
  echo "== making a Debian sid chroot at $root (once)"
  mkdir -p "$root"
  debootstrap --variant=minbase --include=ca-certificates sid "$root" http://deb.debian.org/debian
fi

mounts=() daemon_pid=
# Every step runs whatever failed before it: the host's /dev must not stay bound in the root.
cleanup() {
  set +e
  [ -z "$daemon_pid" ] || { kill "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null; }
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount -l "${mounts[i]}" 2>/dev/null; done
}
trap cleanup EXIT
for m in proc sys dev dev/shm dev/pts; do
  # One left by a run that was killed is taken over (and unmounted at the end).
  mountpoint -q "$root/$m" || mount --bind "/$m" "$root/$m"
  mounts+=("$root/$m")
done

if ! chroot "$root" python3 -c "import torch" 2>/dev/null; then
  echo "== installing torch and a compiler in $root (once)"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  # A registry mirror may serve a Release file past its Valid-Until date.
  echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99plexus-no-valid-until"
  chroot "$root" apt-get update -q
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends \
    python3-torch libtorch-dev g++ python3-dev pybind11-dev python3-expecttest python3-numpy binutils
fi

# The extension, built in the chroot against its torch from a bundle of BUILD's libplexus
# (its libraries beside it, found through its RUNPATH) and the extension's sources.
bundle=$root/opt/plexus-bundle
rm -rf "$bundle" "$root/opt/plexus-ext"
mkdir -p "$bundle/lib" "$bundle/tools"
cp -L "$build/clientlib/libplexus.so.0" "$bundle/lib/"
ldd "$build/clientlib/libplexus.so.0" | awk '/=> \// {print $3}' |
  grep -E '/lib(capnp|kj)-' | xargs -r cp -L -t "$bundle/lib/"
for f in "$bundle"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$f"; done
bash "$repo/tools/gpu/torch_ext_sources.sh" "$repo" "$bundle"
cp "$repo/tools/gpu/build_torch_ext.sh" "$repo/tests/python/torch_backend_test.py" \
  "$repo/tests/python/torch_distributed_suite.py" "$bundle/tools/"
chroot "$root" bash /opt/plexus-bundle/tools/build_torch_ext.sh python3 /opt/plexus-bundle /opt/plexus-ext
version=$(chroot "$root" python3 -c "import torch; print(torch.__version__)")

run_dir=$root/tmp/plexus-torch2
rm -rf "$run_dir"
mkdir -p "$run_dir"
"$build/daemon/plexusd" --socket "$run_dir/plexusd.sock" --metrics-listen 127.0.0.1:0 \
  >"$run_dir/plexusd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do [ -S "$run_dir/plexusd.sock" ] && break; sleep 0.05; done
[ -S "$run_dir/plexusd.sock" ] || { echo "FAIL: plexusd did not start"; cat "$run_dir/plexusd.log"; exit 1; }
in_root() {
  chroot "$root" env PLEXUS_SOCKET=/tmp/plexus-torch2/plexusd.sock PLEXUS_AUTOSTART=0 \
    PYTHONPATH=/opt/plexus-ext TEMP_DIR=/tmp/plexus-torch2 "$@"
}

status=0
IFS=';' read -r -a list <<<"$cases"
for c in "${list[@]}"; do
  echo "== torch $version: $c"
  s=0
  # shellcheck disable=SC2086
  in_root timeout 300 python3 -W ignore /opt/plexus-bundle/tools/torch_backend_test.py $c \
    >"$run_dir/case.out" 2>&1 || s=$?
  grep -E "^(ok|skip|FAIL) " "$run_dir/case.out" || true
  if [ $s -ne 0 ]; then
    status=1
    tail -40 "$run_dir/case.out"
    echo "FAIL torch_backend_test.py $c on torch $version (exit $s)"
  fi
done

if [ $suite -eq 1 ]; then
  for backend in plexus gloo; do
    echo "== torch $version: PyTorch's distributed suite, backend $backend"
    log=$run_dir/suite-$backend.log
    in_root env BACKEND=$backend timeout 1800 python3 -W ignore \
      /opt/plexus-bundle/tools/torch_distributed_suite.py -v >"$log" 2>&1 || true
    # plexus must have no error and no failure; gloo is the peer, reported as it is.
    s=0
    summary=$(bash "$repo/tests/python/suite_summary.sh" "$log") || s=1
    echo "$backend on torch $version: $summary"
    echo "  (log $log)"
    [ $s -eq 0 ] || [ "$backend" = gloo ] || { status=1; echo "FAIL PyTorch's suite with plexus"; }
  done
fi
[ $status -ne 0 ] || echo "ok every case on torch $version"
exit $status
