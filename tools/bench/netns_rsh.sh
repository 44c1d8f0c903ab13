#!/bin/sh
# OpenMPI's launch agent (--mca plm_rsh_agent) for the namespace cluster: instead of ssh to
# HOST, run the command in the network namespace that holds address HOST.
#   netns_rsh.sh HOST COMMAND...
host=$1
shift
for ns in $(ip netns list | awk '{print $1}'); do
  if ip -n "$ns" -4 -o addr show 2>/dev/null | grep -q " inet $host/"; then
    exec ip netns exec "$ns" /bin/sh -c "$*"
  fi
done
echo "netns_rsh: no network namespace holds $host" >&2
exit 255
