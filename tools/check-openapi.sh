#!/usr/bin/env bash
# docs/openapi.yaml: valid OpenAPI 3.1 (openapi-spec-validator, PyPI) and in step with the
# routes and its own schemas (tools/check-openapi.py). Installs its pinned tools into
# target/openapi-check (a venv) on first use, so a fresh machine or CI needs only
# Python 3.10+ with venv and pip.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/openapi-check
if ! [ -x "$venv/bin/openapi-spec-validator" ]; then
  echo "installing openapi-spec-validator, jsonschema and pyyaml into $venv" >&2
  python3 -m venv "$venv" && "$venv/bin/pip" install --quiet openapi-spec-validator==0.7.1 jsonschema pyyaml || {
    echo "error: could not install openapi-spec-validator into $venv: needs Python 3.10+ with venv and pip (Debian: apt-get install python3-venv)" >&2
    exit 1
  }
fi
"$venv/bin/openapi-spec-validator" docs/openapi.yaml
"$venv/bin/python" tools/check-openapi.py
