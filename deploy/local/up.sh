#!/usr/bin/env bash
# Starts a local deployment in the background: Redis (append-only file under
# $EG_LOCAL_DIR/data), eg-ingress, eg-scheduler, eg-sender, eg-deadletter and the demo
# receiver; creates topic "demo" with a subscription to the receiver; prints a curl.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${EG_LOCAL_DIR:-$root/.eg}"
port="${EG_LOCAL_REDIS_PORT:-6380}"
bin="${EG_BIN_DIR:-$root/target/debug}"
mkdir -p "$dir"/{data,logs,run,deadletters}

running() { [ -f "$dir/run/$1.pid" ] && kill -0 "$(cat "$dir/run/$1.pid")" 2>/dev/null; }

if ! running redis; then
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/data" \
    --appendonly yes --appendfsync always --save "" \
    --pidfile "$dir/run/redis.pid" --logfile "$dir/logs/redis.log" --daemonize yes
fi
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" ping >/dev/null || { echo "error: Redis did not start; see $dir/logs/redis.log" >&2; exit 1; }

token_file="$dir/admin-token"
[ -s "$token_file" ] || head -c 24 /dev/urandom | base64 | tr -d '/+=' > "$token_file"
export EG__REDIS__URL="redis://127.0.0.1:$port"
export EG__ADMIN__TOKEN="$(cat "$token_file")"
export EG__DEADLETTER__DIR="$dir/deadletters"
export EG__DEADLETTER__DELAY="${EG__DEADLETTER__DELAY:-10s}"
export EG__DELIVERY__RETRY_SCHEDULE="${EG__DELIVERY__RETRY_SCHEDULE:-2s,5s,10s}"
export EG__INGRESS__LISTEN="${EG__INGRESS__LISTEN:-127.0.0.1:8080}"
# The demo receiver listens on loopback, which deliveries may not reach unless allowed.
export EG__DELIVERY__ALLOWED_NETWORKS="${EG__DELIVERY__ALLOWED_NETWORKS:-127.0.0.1/32}"
export EG_DEMO_RECEIVER_LISTEN="${EG_DEMO_RECEIVER_LISTEN:-127.0.0.1:9000}"

start() {
  local name=$1
  if running "$name"; then echo "$name is already running"; return; fi
  nohup "$bin/$name" >>"$dir/logs/$name.log" 2>&1 &
  echo $! > "$dir/run/$name.pid"
}
for tier in eg-ingress eg-scheduler eg-sender eg-deadletter eg-demo-receiver; do start "$tier"; done

ingress="http://$EG__INGRESS__LISTEN"
for _ in $(seq 100); do curl -fs "$ingress/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "$ingress/readyz" >/dev/null || { echo "error: eg-ingress is not ready; see $dir/logs/eg-ingress.log" >&2; exit 1; }

admin() { curl -fsS -H "Authorization: Bearer $EG__ADMIN__TOKEN" -H 'content-type: application/json' "$@"; }
admin -X PUT "$ingress/admin/topics/demo" -d '{"properties":{"inputSchema":"EventGridSchema"}}' >/dev/null
admin -X PUT "$ingress/admin/topics/demo/eventSubscriptions/demo-receiver" -d "{\"properties\":{
  \"destination\":{\"endpointType\":\"WebHook\",\"properties\":{\"endpointUrl\":\"http://$EG_DEMO_RECEIVER_LISTEN/hook\"}},
  \"retryPolicy\":{\"maxDeliveryAttempts\":5,\"eventTimeToLiveInMinutes\":60},
  \"deadLetterDestination\":{\"endpointType\":\"LocalDirectory\",\"properties\":{\"containerName\":\"demo\"}}}}" >/dev/null
key=$(admin -X POST "$ingress/admin/topics/demo/listKeys" | sed -E 's/.*"key1":"([^"]+)".*/\1/')

cat <<TXT

eg is running: Redis on 127.0.0.1:$port, ingress on $ingress, demo receiver on http://$EG_DEMO_RECEIVER_LISTEN
Admin token: $dir/admin-token   Logs: $dir/logs/   Dead-letters: $dir/deadletters/

Publish an event:

  curl -i -X POST '$ingress/topics/demo/api/events?api-version=2018-01-01' \\
    -H 'aeg-sas-key: $key' -H 'content-type: application/json' \\
    -d '[{"id":"'\$RANDOM'","subject":"/demo/hello","eventType":"Demo.Hello","eventTime":"'\$(date -u +%FT%TZ)'","data":{"hello":"world"}}]'

See it arrive:   curl -s http://$EG_DEMO_RECEIVER_LISTEN/events    (or: just logs)
Stop it all:     just down
TXT
