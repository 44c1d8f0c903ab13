# Sourced by the test scripts: a plexusd of their own on a socket in a fresh temporary
# directory, stopped and removed on exit (also when the test fails).
# usage: start_private_plexusd PLEXUSD PREFIX   sets $dir and exports PLEXUS_SOCKET and
# PLEXUS_AUTOSTART=0 (a daemon the test did not start must not appear behind it).
start_private_plexusd() {
  local plexusd=$1 prefix=$2
  dir=$(mktemp -d "/tmp/$prefix.XXXXXX")
  daemon_pid=
  trap 'stop_private_plexusd' EXIT
  export PLEXUS_SOCKET=$dir/plexusd.sock PLEXUS_AUTOSTART=0
  # Metrics on a port of its own: test scripts run side by side (ctest -j).
  "$plexusd" --socket "$PLEXUS_SOCKET" --metrics-listen 127.0.0.1:0 >"$dir/plexusd.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 100); do [ -S "$PLEXUS_SOCKET" ] && return 0; sleep 0.05; done
  echo "FAIL: plexusd did not start"
  cat "$dir/plexusd.log"
  exit 1
}

stop_private_plexusd() {
  if [ -n "${daemon_pid:-}" ]; then
    kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
    daemon_pid=
  fi
  rm -rf "$dir"
}
