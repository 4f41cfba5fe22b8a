#!/usr/bin/env bash
# Stops what deploy/local/up.sh started: the tiers first (SIGTERM, they finish what
# they hold), Redis last.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${EG_LOCAL_DIR:-$root/.eg}"
[ -d "$dir/run" ] || { echo "nothing is running"; exit 0; }

stop() {
  local name=$1 pidfile="$dir/run/$1.pid"
  [ -f "$pidfile" ] || return 0
  local pid; pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { echo "$name did not stop in 15 s; killing it"; kill -KILL "$pid" 2>/dev/null || true; }
    echo "stopped $name"
  fi
  rm -f "$pidfile"
}
for tier in eg-ingress eg-sender eg-scheduler eg-deadletter eg-demo-receiver; do stop "$tier"; done
stop redis
