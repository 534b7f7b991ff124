#!/usr/bin/env bash
# Start real Kafka (KRaft, 127.0.0.1:9092) and MinIO (127.0.0.1:9000) for development and CI,
# with no Docker: Kafka from Maven Central jars (mvn), MinIO built from source (go install).
# Idempotent: installed pieces are kept, running services are reused, stale pid files cleared.
# State lives in deploy/local/.state/ (gitignored). Stop with deploy/local/down.sh.
set -euo pipefail
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_python
ensure_dirs
# Resolve/build everything before starting anything, so a build failure leaves nothing half-up.
kafka_install
minio_install
kafka_start
minio_start
