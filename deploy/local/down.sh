#!/usr/bin/env bash
# Stop the local Kafka and MinIO started by up.sh (SIGTERM, then SIGKILL after a grace period).
# Data under deploy/local/.state/ is kept; delete that folder for a clean slate.
set -euo pipefail
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

minio_stop
kafka_stop
