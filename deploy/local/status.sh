#!/usr/bin/env bash
# One line per local service; exits non-zero if any is not running and ready.
set -euo pipefail
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rc=0
kafka_status || rc=1
minio_status || rc=1
exit $rc
