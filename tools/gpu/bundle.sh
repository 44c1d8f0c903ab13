#!/usr/bin/env bash
# tools/gpu-check bundle DIR [--build-dir B] [--no-build]: one folder that runs every GPU
# check on a machine with none of our build dependencies (a lent GPU machine reaches no
# package registry): plexusd, plexus-bench, plexusctl, gpu_copy_bench, the GPU test
# binary, libplexus, our libnccl.so.2, every shared library they need beyond the C and C++
# runtimes (found through their RUNPATH, so no process needs LD_LIBRARY_PATH), the torch
# extension's sources with the headers it needs and its build script, and the run
# scripts. Builds the CUDA build (default build-gpu, Release) first unless --no-build.
# Then checks, in a chroot holding nothing else, that every binary loads and runs with
# only the bundle and the C/C++ runtimes (needs root), and that it is under 60 MiB.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 1 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
dir=$1
shift
build=$root/build-gpu build_it=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) build=$2; shift ;;
    --no-build) build_it=0 ;;
    *) echo "gpu-check bundle: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
limit_mib=60
targets=(plexusd plexus-bench plexusctl gpu_copy_bench plexus_gpu_test plexus plexus_nccl)
die() { echo "gpu-check bundle: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root: the check runs every binary in a chroot holding only the bundle"
command -v patchelf >/dev/null || die "needs patchelf (apt-get install patchelf; tools/install-deps.sh installs it)"
# DIR is emptied: never a folder that is not an earlier bundle, the checkout or the build.
if [ -e "$dir" ]; then
  real=$(cd "$dir" && pwd -P)
  case "$real" in
    "$(cd "$root" && pwd -P)" | "$(cd "$build" 2>/dev/null && pwd -P)" | /) die "will not replace $dir: it is the checkout, the build or /" ;;
  esac
  [ -z "$(ls -A "$dir")" ] || [ -f "$dir/MANIFEST" ] || die "will not replace $dir: not empty and not a bundle (no MANIFEST)"
fi

if [ $build_it -eq 1 ]; then
  if [ ! -f "$build/CMakeCache.txt" ]; then
    generator=()
    command -v ninja >/dev/null && generator=(-G Ninja)
    cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DPLEXUS_WITH_CUDA=ON \
      -DPLEXUS_BUILD_PEER_BENCH=OFF
  fi
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
fi
[ -x "$build/tests/gpu/plexus_gpu_test" ] ||
  die "$build has no GPU test binary: not a CUDA build (PLEXUS_WITH_CUDA=ON)?"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
! grep -q '^PLEXUS_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" ||
  die "$build is a sanitizer build: its runtime needs /proc and its own libraries; bundle a plain one"

rm -rf "$dir"
mkdir -p "$dir"/{bin,lib/nccl,lib/fallback,lib/diag,include/plexus,src/python/plexus_torch,src/shm,tools}
dir=$(cd "$dir" && pwd)
for f in daemon/plexusd tools/plexus-bench/plexus-bench tools/plexusctl/plexusctl \
  tools/bench/gpu_copy_bench tests/gpu/plexus_gpu_test; do
  [ -x "$build/$f" ] || die "$build/$f was not built"
  cp "$build/$f" "$dir/bin/"
done
cp -L "$build/clientlib/libplexus.so.0" "$dir/lib/"
ln -s libplexus.so.0 "$dir/lib/libplexus.so"
cp -L "$build/nccl/libnccl.so.2" "$dir/lib/nccl/"
strip --strip-unneeded "$dir"/bin/* "$dir/lib/libplexus.so.0" "$dir/lib/nccl/libnccl.so.2"

# The libraries they load, but the C and C++ runtimes every machine has (the C++ one also
# goes to lib/fallback, for a machine whose own is older than the compiler's here).
base='^(linux-vdso|ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.so'
for f in "$dir"/bin/* "$dir/lib/libplexus.so.0" "$dir/lib/nccl/libnccl.so.2"; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  name=$(basename "$lib")
  if [[ $name =~ $base ]]; then
    case $name in libstdc++.so.6 | libgcc_s.so.1) cp -L "$lib" "$dir/lib/fallback/" ;; esac
  else
    cp -L "$lib" "$dir/lib/$name"
  fi
done
# Each finds the others through its own RUNPATH: no LD_LIBRARY_PATH, which would also put
# this machine's libcrypto, libz, ... ahead of the GPU machine's own in Python and torch.
for f in "$dir"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$dir"/lib/*.so*; do [ -L "$f" ] || patchelf --set-rpath '$ORIGIN' "$f"; done
patchelf --set-rpath '$ORIGIN/..' "$dir/lib/nccl/libnccl.so.2"
cc -O1 -fPIC -shared -Wall -Wextra -Wpedantic -Wshadow -Werror -o "$dir/lib/diag/libcrash_trace.so" \
  "$root/tools/gpu/crash_trace.c"

# The torch extension's sources, the C API and the Boost headers it includes, and the
# scripts that run it all.
bash "$root/tools/gpu/torch_ext_sources.sh" "$root" "$dir" || die "could not copy the torch extension's sources"
cp "$root"/tools/gpu/{run.sh,steps.sh,build_torch_ext.sh,ddp_cuda.py,latency_gloo.py,spawn_ranks.py,weights_cuda.py} "$dir/tools/"
cp "$root/tests/libplexus_no_kernels_test.sh" "$root/tests/python/torch_backend_test.py" "$dir/tools/"
{
  echo "plexus source $(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown) at bundling, $(date -u +%FT%TZ)"
  echo "build $build: $(cache_value CMAKE_BUILD_TYPE), $("$(cache_value CMAKE_CXX_COMPILER)" --version | head -1), $("$(cache_value CUDAToolkit_NVCC_EXECUTABLE)" --version | tail -1)"
  echo "on $(. /etc/os-release && echo "$PRETTY_NAME")"
} >"$dir/MANIFEST"

# The check: a chroot with the dynamic loader, the C/C++ runtimes and the bundle alone,
# with no library path: the RUNPATHs must find everything.
jail=$(mktemp -d)
trap 'rm -rf "$jail"' EXIT
mkdir -p "$jail/lib64" "$jail/lib" "$jail/tmp"
cp -L /lib64/ld-linux-x86-64.so.2 "$jail/lib64/"
for name in libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 libresolv.so.2 \
  libstdc++.so.6 libgcc_s.so.1; do
  cp -L "$(ldconfig -p | awk -v n="$name" '$1 == n && /x86-64/ {print $NF; exit}')" "$jail/lib/"
done
cp -a "$dir" "$jail/bundle"
in_jail() { chroot "$jail" /lib64/ld-linux-x86-64.so.2 --library-path /lib "$@"; }
problems=0
for f in "$jail"/bundle/bin/* "$jail"/bundle/lib/*.so* "$jail"/bundle/lib/nccl/*.so* "$jail"/bundle/lib/diag/*.so; do
  [ -L "$f" ] && continue
  rel=/bundle/${f#"$jail"/bundle/}
  if ! listing=$(in_jail --list "$rel" 2>&1) || grep -q "not found" <<<"$listing"; then
    echo "gpu-check bundle: $rel does not load from the bundle alone:" >&2
    echo "$listing" | grep -v "=> /" >&2
    problems=1
  fi
done
for run in "bin/plexusd --help" "bin/plexus-bench --help" "bin/plexusctl --help" \
  "bin/gpu_copy_bench --help" "bin/plexus_gpu_test --gtest_list_tests"; do
  # shellcheck disable=SC2086
  if ! in_jail /bundle/$run >/dev/null 2>"$jail/tmp/err"; then
    echo "gpu-check bundle: '$run' fails with the bundle alone: $(head -3 "$jail/tmp/err")" >&2
    problems=1
  fi
done
size_mib=$(($(du -sb "$dir" | cut -f1) / 1048576))
if [ "$size_mib" -ge $limit_mib ]; then
  echo "gpu-check bundle: $dir is $size_mib MiB, over the $limit_mib MiB a lent machine's call carries" >&2
  problems=1
fi
[ $problems -eq 0 ] || exit 1
echo "gpu-check bundle: $dir ($size_mib MiB, $(find "$dir" -type f | wc -l) files); every binary loads and runs with the bundle alone"
