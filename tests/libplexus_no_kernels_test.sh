#!/usr/bin/env bash
# libplexus launches no GPU kernel: the shared library references no kernel-launch or
# kernel-registration symbol, and links neither the CUDA runtime nor the driver (the driver
# is loaded at run time and only the entry points in shm/cuda_driver.h are looked up, none
# of which launches a kernel: checked here against the source list too).
# Usage: libplexus_no_kernels_test.sh LIBPLEXUS_SO SOURCE_DIR
set -euo pipefail
lib=$1
src=$2
[[ -f $lib ]] || { echo "FAIL: $lib does not exist"; exit 1; }
failed=0
undefined=$(nm -D --undefined-only "$lib" | awk '{print $NF}')
launch=$(grep -E '^(cuda(LaunchKernel|LaunchCooperativeKernel|LaunchHostFunc|ConfigureCall|GraphLaunch)|cu(LaunchKernel|LaunchCooperativeKernel|LaunchHostFunc|GraphLaunch|ModuleLoad)|__cudaRegister|__cudaPush)' <<<"$undefined" || true)
if [[ -n $launch ]]; then
  echo "FAIL: $lib references kernel-launch symbols:"
  echo "$launch"
  failed=1
fi
needed=$(readelf -d "$lib" | awk '/NEEDED/ {print $NF}')
if grep -qE 'libcudart|libcuda\.' <<<"$needed"; then
  echo "FAIL: $lib links the CUDA runtime or driver (it must load the driver at run time):"
  echo "$needed"
  failed=1
fi
# The only driver entry points looked up at run time.
entry_points=$(grep -oE 'X\([a-z_0-9]+, cu[A-Za-z0-9_]+, [0-9]+\)' "$src/shm/cuda_driver.h" | sed -E 's/X\([a-z_0-9]+, (cu[A-Za-z0-9_]+), [0-9]+\)/\1/')
if [[ -z $entry_points ]]; then
  echo "FAIL: no driver entry points found in $src/shm/cuda_driver.h"
  failed=1
fi
bad=$(grep -E 'Launch|Module|Graph|Kernel|Func' <<<"$entry_points" || true)
if [[ -n $bad ]]; then
  echo "FAIL: shm/cuda_driver.h loads entry points that can run kernels:"
  echo "$bad"
  failed=1
fi
strings_hits=$(strings "$lib" | grep -xE 'cu(LaunchKernel|LaunchCooperativeKernel|LaunchHostFunc|GraphLaunch|ModuleLoad[A-Za-z]*)' || true)
if [[ -n $strings_hits ]]; then
  echo "FAIL: $lib holds the name of a kernel-launch entry point (a dlsym/cuGetProcAddress lookup?):"
  echo "$strings_hits"
  failed=1
fi
(( failed == 0 )) || exit 1
echo "ok: $lib: $(wc -l <<<"$undefined") undefined symbols, none launches a kernel; NEEDED: $(tr '\n' ' ' <<<"$needed")"
echo "driver entry points loaded at run time: $(tr '\n' ' ' <<<"$entry_points")"
