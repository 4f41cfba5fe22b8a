#!/usr/bin/env bash
# Starts a local deployment in the background: Redis (append-only file under
# $EG_LOCAL_DIR/data), eg-ingress, eg-scheduler, eg-sender, eg-deadletter and the demo
# receiver; creates topic "demo" with a subscription to the receiver; prints a curl.
set -euo pipefail
source "$(dirname "$0")/common.sh"
tier_env

if [ -n "${EG__REDIS__CLUSTER_NODES:-}" ]; then
  redis_where="the Redis Cluster at $EG__REDIS__CLUSTER_NODES"
else
  if ! running redis; then
    redis-server --port "$port" --bind 127.0.0.1 --dir "$dir/data" \
      --appendonly yes --appendfsync always --save "" \
      --pidfile "$dir/run/redis.pid" --logfile "$dir/logs/redis.log" --daemonize yes
  fi
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping >/dev/null || { echo "error: Redis did not start; see $dir/logs/redis.log" >&2; exit 1; }
  redis_where="Redis on 127.0.0.1:$port"
fi

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

eg is running: $redis_where, ingress on $ingress, demo receiver on http://$EG_DEMO_RECEIVER_LISTEN
Admin token: $dir/admin-token   Logs: $dir/logs/   Dead-letters: $dir/deadletters/

Publish an event:

  curl -i -X POST '$ingress/topics/demo/api/events?api-version=2018-01-01' \\
    -H 'aeg-sas-key: $key' -H 'content-type: application/json' \\
    -d '[{"id":"'\$RANDOM'","subject":"/demo/hello","eventType":"Demo.Hello","eventTime":"'\$(date -u +%FT%TZ)'","data":{"hello":"world"}}]'

See it arrive:   curl -s http://$EG_DEMO_RECEIVER_LISTEN/events    (or: just logs)
Operate it:      just status, just egctl --help (docs/egctl.md), just scale sender 3
Stop it all:     just down
TXT
