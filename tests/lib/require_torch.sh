# Sourced by the torch test scripts: exit 77 (ctest SKIP), saying why, where $python has no
# torch or plexus_torch was not built in $pydir.
if ! "$python" -c "import torch" 2>/dev/null; then
  echo "SKIP: $python has no torch (apt-get install python3-torch; tools/install-deps.sh does)"
  exit 77
fi
if ! ls "$pydir"/plexus_torch*.so >/dev/null 2>&1; then
  echo "SKIP: plexus_torch was not built in $pydir (libtorch-dev, python3-dev and pybind11-dev are needed)"
  exit 77
fi
