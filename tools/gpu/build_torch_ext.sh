#!/usr/bin/env bash
# Builds the torch.distributed backend extension (plexus_torch) from a gpu-check bundle
# against whatever torch PYTHON imports, with the machine's g++ and no CMake: the torch
# that pip installs brings CMake files that look for the CUDA toolkit and cuDNN, none of
# which the extension uses. Links the bundle's libplexus.so.0 (the extension uses only the
# C API), so no object built here with another compiler's LTO or ABI is linked there.
# Python's own symbols stay undefined, as in every extension module: the interpreter has them.
#   build_torch_ext.sh PYTHON BUNDLE OUTDIR
set -euo pipefail
python=$1 bundle=$2 outdir=$3
mkdir -p "$outdir/obj"
# Include and library folders, the C++ ABI torch was built with, the module's file name.
settings=$("$python" - <<'EOF'
import sysconfig, torch, torch.utils.cpp_extension as ext
print("torch_includes='%s'" % " ".join(ext.include_paths()))
print("torch_libdirs='%s'" % " ".join(ext.library_paths()))
print("python_include='%s'" % sysconfig.get_paths()["include"])
print("cxx11_abi=%d" % int(torch.compiled_with_cxx11_abi()))
print("suffix='%s'" % sysconfig.get_config_var("EXT_SUFFIX"))
print("torch_version='%s'" % torch.__version__)
# pybind11 finds torch's c10d.Backend (our base class) only where the ABI tags match.
tags = [f'-DPYBIND11_{k}="{v}"' for k in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI")
        if (v := getattr(torch._C, "_PYBIND11_" + k, None))]
print("pybind11_tags='%s'" % " ".join(tags))
EOF
) || { echo "FAIL $python could not tell torch's include folders, libraries and ABI (above)"; exit 1; }
eval "$settings"
[ -f "$python_include/Python.h" ] || { echo "FAIL no Python.h in $python_include: this Python's development headers are not installed"; exit 1; }
# The compiler: the first that links a shared object against the shared C++ runtime, as
# torch is linked. One that links it statically (seen on a GPU image: CXX=/opt/gcc/bin/g++,
# a wrapper of g++-real that adds a static libstdc++ even past -nodefaultlibs) gives the
# extension a second copy of the runtime, whose streams crash the first time a number is
# formatted into an error message.
probe_dir=$(mktemp -d)
printf '#include <sstream>\nstd::string f(long v) { std::ostringstream s; s << v; return s.str(); }\n' >"$probe_dir/p.cc"
cxx=""
for candidate in ${CXX:-} g++ c++ /usr/bin/g++ /usr/bin/c++ ${CXX:+"$(dirname "$CXX")/g++-real"} g++-13 g++-14 g++-12 x86_64-linux-gnu-g++ x86_64-linux-gnu-g++-13 clang++; do
  command -v "$candidate" >/dev/null || continue
  if "$candidate" -shared -fPIC -o "$probe_dir/p.so" "$probe_dir/p.cc" 2>/dev/null &&
    readelf -d "$probe_dir/p.so" | grep -q 'NEEDED.*libstdc++'; then
    cxx=$candidate
    break
  fi
  echo "$candidate links the C++ runtime statically (or fails): not used"
done
rm -rf "$probe_dir"
[ -n "$cxx" ] || { echo "FAIL no compiler here links the shared C++ runtime (tried \$CXX, g++, c++, clang++)"; exit 1; }
flags=(-std=c++20 -O2 -fPIC -fvisibility=hidden -D_GLIBCXX_USE_CXX11_ABI="$cxx11_abi" -DNDEBUG
       -I"$bundle/src" -I"$bundle/include" -isystem "$python_include")
for d in $torch_includes; do flags+=(-isystem "$d"); done
for t in $pybind11_tags; do flags+=("$t"); done
echo "torch $torch_version, $($cxx --version | head -1), C++11 ABI $cxx11_abi, pybind11 tags: ${pybind11_tags:-none}"
start=$(date +%s)
pids=()
for src in "$bundle"/src/python/plexus_torch/*.cc; do
  obj=$outdir/obj/$(basename "$src" .cc).o
  "$cxx" "${flags[@]}" -c "$src" -o "$obj" >"$obj.log" 2>&1 &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
cat "$outdir"/obj/*.log
[ $failed -eq 0 ] || { echo "FAIL compiling plexus_torch against torch $torch_version"; exit 1; }
libs=()
for d in $torch_libdirs; do libs+=(-L"$d" -Wl,-rpath,"$d"); done
so=$outdir/plexus_torch$suffix
"$cxx" -shared -o "$so" "$outdir"/obj/*.o -L"$bundle/lib" -l:libplexus.so.0 \
  -Wl,-rpath,"$bundle/lib" "${libs[@]}" -ltorch_python -ltorch -ltorch_cpu -lc10
readelf -d "$so" | grep -q 'NEEDED.*libstdc++' ||
  { echo "FAIL $so holds a static copy of the C++ runtime (not libstdc++.so.6, as torch uses)"; exit 1; }
echo "FIGURE built against torch $torch_version in $(($(date +%s) - start)) s"
PYTHONPATH=$outdir "$python" -c "import plexus_torch, torch.distributed as dist; print('imported', plexus_torch.__file__)"
