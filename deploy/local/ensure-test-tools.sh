#!/usr/bin/env bash
# Makes sure what `just test` needs beyond Redis is there, installing what is missing when
# we can, or stopping with a message saying what to install:
# - chromium and chromedriver, for the status page's browser tests
#   (tests/tests/system/status_page.rs), from Debian's packages;
# - Azure's official Event Grid SDK for Python in target/python-sdk (a venv, from PyPI):
#   the namespace tests drive its publisher and consumer clients against eg
#   (tests/src/python_sdk.rs finds it there, or at $EG_PYTHON_SDK).
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if command -v apt-get >/dev/null && { [ -z "$sudo" ] || command -v sudo >/dev/null; }; then
    echo "chromium or chromedriver is missing; installing them from Debian's packages" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
  if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
    echo "error: the status page's browser tests need chromium and chromedriver (Debian/Ubuntu: apt-get install chromium chromium-driver), or CHROME_BIN and CHROMEDRIVER pointing at them." >&2
    exit 1
  fi
fi

sdk="${EG_PYTHON_SDK:-target/python-sdk/bin/python}"
if ! "$sdk" -c 'import azure.eventgrid' 2>/dev/null; then
  if [ -n "${EG_PYTHON_SDK:-}" ]; then
    echo "error: EG_PYTHON_SDK=$EG_PYTHON_SDK has no azure-eventgrid (pip install azure-eventgrid==4.22.1 into it)." >&2
    exit 1
  fi
  echo "installing Azure's Event Grid SDK for Python into target/python-sdk (for the namespace tests)" >&2
  python3 -m venv target/python-sdk && target/python-sdk/bin/pip install --quiet azure-eventgrid==4.22.1 || {
    echo "error: could not install azure-eventgrid into target/python-sdk: the namespace tests need Python 3.10+ with venv and pip (Debian: apt-get install python3-venv)." >&2
    exit 1
  }
fi
