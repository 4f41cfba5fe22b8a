# Sourced by up.sh, scale.sh and down.sh: where the local deployment lives, the
# environment every tier runs with (so a copy started later by `just scale` matches
# those `just up` started), and how processes are started and stopped by pid file.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${EG_LOCAL_DIR:-$root/.eg}"
port="${EG_LOCAL_REDIS_PORT:-6380}"
bin="${EG_BIN_DIR:-$root/target/debug}"
token_file="$dir/admin-token"

# Exports the tiers' environment; creates the directories and the admin token first.
tier_env() {
  mkdir -p "$dir"/{data,logs,run,deadletters}
  [ -s "$token_file" ] || head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$token_file"
  export EG__REDIS__URL="redis://127.0.0.1:$port"
  # After `just cluster-up`, the tiers use that cluster (2 partitions per primary).
  if [ -s "$dir/cluster-nodes" ] && [ -z "${EG__REDIS__CLUSTER_NODES:-}" ]; then
    export EG__REDIS__CLUSTER_NODES="$(cat "$dir/cluster-nodes")"
    export EG__REDIS__PARTITIONS="${EG__REDIS__PARTITIONS:-6}"
  fi
  export EG__ADMIN__TOKEN="$(cat "$token_file")"
  export EG__DEADLETTER__DIR="$dir/deadletters"
  export EG__DEADLETTER__DELAY="${EG__DEADLETTER__DELAY:-10s}"
  # A quick retry schedule that applies as written: the default retry minimums
  # (408=2m,503=30s,*=10s) would raise its first steps after a failing status.
  export EG__DELIVERY__RETRY_SCHEDULE="${EG__DELIVERY__RETRY_SCHEDULE:-2s,5s,10s}"
  export EG__DELIVERY__RETRY_MINIMUMS="${EG__DELIVERY__RETRY_MINIMUMS:-*=0s}"
  # No endpoint probation longer than a minute (after a 404 the first one is 5 min).
  export EG__PROBATION__MAX="${EG__PROBATION__MAX:-1m}"
  # The demo receiver listens on loopback, which deliveries may not reach unless allowed.
  export EG__DELIVERY__ALLOWED_NETWORKS="${EG__DELIVERY__ALLOWED_NETWORKS:-127.0.0.1/32}"
  # Every address `just up` listens on; each is overridden by its own variable.
  export EG__INGRESS__LISTEN="${EG__INGRESS__LISTEN:-127.0.0.1:8080}"
  export EG_DEMO_RECEIVER_LISTEN="${EG_DEMO_RECEIVER_LISTEN:-127.0.0.1:9000}"
  export EG__SENDER__LISTEN="${EG__SENDER__LISTEN:-127.0.0.1:9091}"
  export EG__SCHEDULER__LISTEN="${EG__SCHEDULER__LISTEN:-127.0.0.1:9092}"
  export EG__DEADLETTER__LISTEN="${EG__DEADLETTER__LISTEN:-127.0.0.1:9093}"
}

# The address a process of `just up` listens on and the variable that sets it, as
# "ADDRESS VARIABLE" (after tier_env); nothing for Redis on a cluster.
listen_address() {
  case "$1" in
    redis) [ -n "${EG__REDIS__CLUSTER_NODES:-}" ] || echo "127.0.0.1:$port EG_LOCAL_REDIS_PORT" ;;
    eg-ingress) echo "$EG__INGRESS__LISTEN EG__INGRESS__LISTEN" ;;
    eg-sender) echo "$EG__SENDER__LISTEN EG__SENDER__LISTEN" ;;
    eg-scheduler) echo "$EG__SCHEDULER__LISTEN EG__SCHEDULER__LISTEN" ;;
    eg-deadletter) echo "$EG__DEADLETTER__LISTEN EG__DEADLETTER__LISTEN" ;;
    eg-demo-receiver) echo "$EG_DEMO_RECEIVER_LISTEN EG_DEMO_RECEIVER_LISTEN" ;;
  esac
}

# Whether something accepts connections on ADDRESS (host:port; a wildcard host is
# asked on loopback). Port 0 (any free port) is never taken.
port_taken() {
  local host=${1%:*} p=${1##*:}
  [ "$p" = 0 ] && return 1
  case "$host" in 0.0.0.0 | "" | "[::]" | "*") host=127.0.0.1 ;; esac
  host=${host#[}; host=${host%]}
  (exec 3<>"/dev/tcp/$host/$p") 2>/dev/null
}

# Whether the process of pid file run/<name>.pid is alive.
running() { [ -f "$dir/run/$1.pid" ] && kill -0 "$(cat "$dir/run/$1.pid")" 2>/dev/null; }

# start NAME [BINARY]: runs BINARY (default NAME) in the background, logging to
# logs/NAME.log, its pid in run/NAME.pid. Does nothing if NAME is running.
start() {
  local name=$1 binary=${2:-$1}
  if running "$name"; then echo "$name is already running"; return; fi
  [ -x "$bin/$binary" ] || { echo "error: $bin/$binary is missing; build it with \`cargo build -p $binary\` (just up builds the tiers and the demo receiver)" >&2; return 1; }
  nohup "$bin/$binary" >>"$dir/logs/$name.log" 2>&1 &
  echo $! > "$dir/run/$name.pid"
}

# stop NAME…: SIGTERM to all the named processes at once (each finishes what it holds),
# then one wait of at most 15 s for them all, SIGKILL for any still running.
stop() {
  local name pid pidfile waiting=()
  for name in "$@"; do
    pidfile="$dir/run/$name.pid"
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      waiting+=("$name:$pid")
    else
      rm -f "$pidfile"
    fi
  done
  local entry alive
  for _ in $(seq 150); do
    alive=0
    for entry in "${waiting[@]}"; do kill -0 "${entry#*:}" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for entry in "${waiting[@]}"; do
    name=${entry%%:*} pid=${entry#*:}
    if kill -0 "$pid" 2>/dev/null; then
      echo "$name did not stop in 15 s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    echo "stopped $name"
    rm -f "$dir/run/$name.pid"
  done
}

# The names of the running-or-recorded copies of a tier: eg-sender, eg-sender-2, …
copies() {
  local tier=$1 f
  for f in "$dir/run/$tier.pid" "$dir/run/$tier"-[0-9]*.pid; do
    [ -f "$f" ] && basename "$f" .pid
  done
  return 0
}
