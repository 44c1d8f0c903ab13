# Sourced by the cluster tests: where network namespaces cannot be created (no root, a
# restricted container), exit 77, which ctest reports as a skip, with the reason.
probe=pxprobe$$
if ! probe_error=$(ip netns add "$probe" 2>&1); then
  echo "SKIP: cannot create network namespaces here: $probe_error"
  exit 77
fi
ip netns del "$probe"
