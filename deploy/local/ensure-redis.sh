#!/usr/bin/env bash
# Makes sure `redis-server` is installed: installs it from Debian's packages when it is
# missing and we can, or stops with a message saying what to install.
set -euo pipefail
command -v redis-server >/dev/null && exit 0
if command -v apt-get >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if [ -z "$sudo" ] || command -v sudo >/dev/null; then
    echo "redis-server is missing; installing it from Debian's packages" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >/dev/null
    # The package may start a system-wide Redis on 6379; eg does not use it.
    command -v redis-server >/dev/null && exit 0
  fi
fi
echo "error: redis-server is not installed. Install Redis 7 (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) and try again." >&2
exit 1
