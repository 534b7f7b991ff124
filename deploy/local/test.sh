#!/usr/bin/env bash
# THE test command: install the package, start the real services, lint, type-check, test.
#   bash deploy/local/test.sh [pytest args...]
# Every check runs even if an earlier one failed; the exit status is non-zero if any failed
# (pytest's "no tests collected", exit 5, counts as a failure). Services are left running;
# stop them with deploy/local/down.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
export PYTHON

step() { printf '\n==> %s\n' "$*"; }

# pip install compiles the native evidence core (producers/native, Rust) with cargo; without it maturin
# would try to download a toolchain and fail at length. Say what is missing in one line instead.
if ! command -v cargo >/dev/null; then
    echo "error: cargo is not on PATH: pip install builds the native core (Rust); install a Rust toolchain (rustup) and run again" >&2
    exit 1
fi

step "pip install -e '.[server,dev]'"
"$PYTHON" -m pip install -q --disable-pip-version-check --root-user-action=ignore -e '.[server,dev]'

# --- deploy tools (tests/deploy/test_helm.py) -------------------------------------------------------
# helm, built from the Go module proxy into the services' state directory (bin/), once per machine
# (~3.5 min on 2 cores; reused while the pinned version is what is there).
HELM_VERSION=v4.3.2
tools_state="${BLACKBOX_LOCAL_STATE:-deploy/local/.state}"
helm_bin="$tools_state/bin/helm"
if ! { [[ -x $helm_bin ]] && go version -m "$helm_bin" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+helm.sh/helm/v4[[:space:]]+${HELM_VERSION}[[:space:]]"; }; then
    step "go install helm.sh/helm/v4/cmd/helm@${HELM_VERSION} (for tests/deploy/test_helm.py)"
    command -v go >/dev/null || { echo "error: go is not on PATH: helm is built with go install" >&2; exit 1; }
    mkdir -p "$tools_state/bin" "$tools_state/logs"
    helm_log="$tools_state/logs/helm-build.log"
    if ! GOBIN="$(cd "$tools_state/bin" && pwd)" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
        go install "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}" >"$helm_log" 2>&1; then
        tail -n 20 "$helm_log" >&2
        echo "error: go install of helm ${HELM_VERSION} failed (log: $helm_log)" >&2
        exit 1
    fi
fi
# --- end of deploy tools ------------------------------------------------------------------------------

# tests/test_compose.py validates deploy/compose.yaml with a real Compose implementation; it needs
# no Docker daemon. Debian's docker-compose is enough where `docker compose` is missing.
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        step "apt-get install docker-compose (for tests/test_compose.py)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
    else
        echo "warning: no Compose implementation and cannot apt-get install docker-compose" >&2
    fi
fi

# tests/consumers/report renders the HTML report in a real headless browser.
if ! command -v chromium >/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        step "apt-get install chromium (for the report test)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
    else
        echo "warning: chromium is missing and cannot be installed; the report test will fail" >&2
    fi
fi

# producers/typescript (the Node SDK, agent-blackbox on npm): pytest builds it (strict tsc) and runs
# its node --test suite and the Node-to-Python tests (tests/producers/typescript); npm ci installs
# exactly its package-lock.json (~10 s).
if ! command -v npm >/dev/null; then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        step "apt-get install nodejs npm (for the Node SDK)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
    else
        echo "warning: node/npm are missing and cannot be installed; the Node SDK tests will fail" >&2
    fi
fi
step "npm ci (producers/typescript)"
(cd producers/typescript && npm ci --no-audit --no-fund --loglevel=error)
# tests/interop runs real OpenTelemetry exporters of other languages against the receiver: a Node
# program on the Vercel AI SDK (npm ci from the committed lock file) and a Go one (the module proxy).
step "npm ci (tests/interop/node)"
npm ci --prefix tests/interop/node --no-audit --no-fund --loglevel=error
step "go build (tests/interop/go)"
(cd tests/interop/go && go build -o bin/exporter .)
# tests/interop/test_go_witness.py runs the transparency-log community's witness (DESIGN 24) and checks
# its cosignatures with the Go note libraries: both built from the Go module proxy, pinned.
OMNIWITNESS_VERSION=v0.0.0-20260720115447-2e1c6971d19e
if ! command -v go >/dev/null; then
    echo "warning: go is not on PATH: the witness interop test will fail" >&2
elif [[ ! -x "$(go env GOPATH)/bin/omniwitness" ]]; then
    step "go install transparency-dev/witness omniwitness@$OMNIWITNESS_VERSION"
    go install "github.com/transparency-dev/witness/cmd/omniwitness@$OMNIWITNESS_VERSION"
fi
command -v go >/dev/null && go -C tests/interop/go-witness mod download

step "deploy/local/up.sh"
bash deploy/local/up.sh

failed=()
step "ruff check ."
ruff check . || failed+=("ruff check")
step "ruff format --check ."
ruff format --check . || failed+=("ruff format")
step "mypy"
mypy || failed+=("mypy")
step "pytest $*"
rc=0
"$PYTHON" -m pytest "$@" || rc=$?
if [[ $rc == 5 ]]; then
    echo "pytest collected no tests (exit 5): that counts as a failure" >&2
fi
[[ $rc == 0 ]] || failed+=("pytest (exit $rc)")

if ((${#failed[@]})); then
    printf '\nFAILED: %s\n' "$(IFS=,; echo "${failed[*]}" | sed 's/,/, /g')" >&2
    exit 1
fi
printf '\nall checks passed\n'
