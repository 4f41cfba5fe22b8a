#!/usr/bin/env bash
# eg-healthcheck PORT [PATH] — exits 0 when http://127.0.0.1:PORT/PATH (default /readyz)
# answers 200, else prints what it got and exits 1. The container health check of
# docker-compose.yml; the image has no curl, and bash's /dev/tcp is enough for one GET.
set -euo pipefail
port="${1:?usage: eg-healthcheck PORT [PATH]}"
path="${2:-/readyz}"
exec 3<>"/dev/tcp/127.0.0.1/${port}"
printf 'GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$path" >&3
status=""
IFS= read -r -t 5 status <&3 || true
case "$status" in
  "HTTP/1.1 200 "*) exit 0 ;;
  *) echo "GET $path on port $port: ${status:-no answer within 5 s}" >&2; exit 1 ;;
esac
