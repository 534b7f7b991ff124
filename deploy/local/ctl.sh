#!/usr/bin/env bash
# Control one local service, for fault-injection tests and by hand:
#   ctl.sh start|stop|restart|status kafka|minio   (restart keeps data; start waits until ready)
#   ctl.sh pause|resume minio                       (SIGSTOP / SIGCONT the MinIO process)
#   ctl.sh pidfile kafka|minio                      (print the pid file path)
#   ctl.sh statedir                                 (print the state directory)
#   ctl.sh install                                  (resolve Kafka, build MinIO; start nothing)
set -euo pipefail
# shellcheck source=deploy/local/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
    sed -n '2,7p' "${BASH_SOURCE[0]}" >&2
    exit 2
}

action=${1:-}
service=${2:-}
case "$action:$service" in
statedir:) printf '%s\n' "$STATE_DIR" ;;
install:)
    ensure_python
    kafka_install
    minio_install
    ;;
pidfile:kafka) printf '%s\n' "$KAFKA_PID" ;;
pidfile:minio) printf '%s\n' "$MINIO_PID" ;;
start:kafka | start:minio)
    ensure_python
    ensure_dirs
    "${service}_start"
    ;;
stop:kafka | stop:minio) "${service}_stop" ;;
restart:kafka | restart:minio)
    ensure_python
    "${service}_stop"
    "${service}_start"
    ;;
status:kafka | status:minio) "${service}_status" ;;
pause:minio) minio_pause ;;
resume:minio)
    ensure_python
    minio_resume
    ;;
*) usage ;;
esac
