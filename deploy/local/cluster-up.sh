#!/usr/bin/env bash
# Starts a local Redis Cluster: 3 primaries (plus EG_LOCAL_CLUSTER_REPLICAS replicas
# each, default 0) as separate redis-server processes on loopback, data under
# $EG_LOCAL_DIR/cluster/<port>. Joins them on first start (`redis-cli --cluster create`:
# contiguous equal slot ranges); later starts reuse each node's nodes.conf. Records the
# seed nodes in $EG_LOCAL_DIR/cluster-nodes, which `just up` then uses instead of a
# single Redis (EG__REDIS__CLUSTER_NODES, 6 partitions: 2 per primary).
set -euo pipefail
source "$(dirname "$0")/common.sh"
first="${EG_LOCAL_CLUSTER_PORT:-7001}"
replicas="${EG_LOCAL_CLUSTER_REPLICAS:-0}"
count=$((3 * (1 + replicas)))
ports=()
for i in $(seq 0 $((count - 1))); do ports+=($((first + i))); done
mkdir -p "$dir/cluster" "$dir/logs" "$dir/run"

for p in "${ports[@]}"; do
  if running "redis-$p"; then continue; fi
  mkdir -p "$dir/cluster/$p"
  redis-server --port "$p" --bind 127.0.0.1 --dir "$dir/cluster/$p" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
    --appendonly yes --appendfsync always --save "" --stream-node-max-bytes 16384 \
    --pidfile "$dir/run/redis-$p.pid" --logfile "$dir/logs/redis-$p.log" --daemonize yes
done
for p in "${ports[@]}"; do
  for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$p" ping >/dev/null || { echo "error: node $p did not start; see $dir/logs/redis-$p.log" >&2; exit 1; }
done

if [ "$(redis-cli -p "$first" cluster info | tr -d '\r' | sed -n 's/^cluster_known_nodes://p')" = "1" ]; then
  nodes=()
  for p in "${ports[@]}"; do nodes+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes >"$dir/logs/cluster-create.log"
fi
for _ in $(seq 100); do
  redis-cli -p "$first" cluster info | grep -q '^cluster_state:ok' && break
  sleep 0.1
done
redis-cli -p "$first" cluster info | grep -q '^cluster_state:ok' || { echo "error: the cluster is not ok; see $dir/logs/" >&2; exit 1; }

urls=()
for p in "${ports[@]}"; do urls+=("redis://127.0.0.1:$p"); done
(IFS=,; echo "${urls[*]}") > "$dir/cluster-nodes"
echo "Redis Cluster up: ${#ports[@]} nodes on ports ${ports[0]}-${ports[-1]} ($replicas replica(s) per primary)."
redis-cli -p "$first" cluster nodes | awk '{print "  " $2, $3, $9, $10}' | sed 's/@[0-9]*//'
echo "just up now runs the tiers on it (EG__REDIS__CLUSTER_NODES=$(cat "$dir/cluster-nodes"))."
