# shellcheck shell=bash
# Shared by up.sh, down.sh, status.sh and ctl.sh: where things live and how each service is
# installed, started, checked and stopped. Sourced, never run. Everything binds to loopback.
#
# State (gitignored) lives under deploy/local/.state/ unless BLACKBOX_LOCAL_STATE says otherwise:
#   bin/minio               the pinned MinIO build
#   kafka/                  classpath.txt, server.properties, log4j2.properties, cluster-id
#   kafka-data/             KRaft metadata + topic logs (kept across restarts)
#   minio-data/             MinIO objects (kept across restarts)
#   logs/                   kafka-server.log, kafka.out, minio.log
#   pids/kafka.pid, pids/minio.pid

LOCAL_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$LOCAL_DIR/../.." && pwd)"
STATE_DIR="${BLACKBOX_LOCAL_STATE:-$LOCAL_DIR/.state}"
BIN_DIR="$STATE_DIR/bin"
LOG_DIR="$STATE_DIR/logs"
PID_DIR="$STATE_DIR/pids"
KAFKA_CONF_DIR="$STATE_DIR/kafka"
KAFKA_DATA="$STATE_DIR/kafka-data"
MINIO_DATA="$STATE_DIR/minio-data"
KAFKA_PID="$PID_DIR/kafka.pid"
MINIO_PID="$PID_DIR/minio.pid"

KAFKA_VERSION="4.1.1"
KAFKA_HOST="127.0.0.1"
KAFKA_PORT=9092
KAFKA_CONTROLLER_PORT=9093
KAFKA_HEAP="${BLACKBOX_KAFKA_HEAP:--Xms256m -Xmx512m}"
KAFKA_TOPICS=("blackbox.captures.v1:4" "blackbox.captures.v1.dlq:1")

MINIO_MODULE="github.com/minio/minio"
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
MINIO_HOST="127.0.0.1"
MINIO_PORT=9000
MINIO_CONSOLE_PORT=9001
MINIO_USER="blackbox"
MINIO_PASSWORD="blackbox-secret"
MINIO_BUCKET="blackbox"

# The interpreter that has the project installed: $PYTHON if set, else the one up.sh last used
# (recorded in $STATE_DIR/python, so status.sh from a shell without the virtual environment on PATH
# still asks Kafka with a Python that can), else python on PATH.
PYTHON_FILE="$STATE_DIR/python"
if [[ -z "${PYTHON:-}" && -f "$PYTHON_FILE" && -x "$(cat "$PYTHON_FILE")" ]]; then
    PYTHON="$(cat "$PYTHON_FILE")"
fi
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
SVC_PY="$LOCAL_DIR/svc.py"

log() { printf '%s\n' "$*"; }
die() {
    printf 'deploy/local: %s\n' "$*" >&2
    exit 1
}

ensure_dirs() {
    mkdir -p "$BIN_DIR" "$LOG_DIR" "$PID_DIR" "$KAFKA_CONF_DIR" "$KAFKA_DATA" "$MINIO_DATA"
}

ensure_python() {
    [[ -n "$PYTHON" ]] || die "no python found; install Python 3.11 and run: pip install -e '.[server,dev]'"
    "$PYTHON" -c 'import confluent_kafka, minio' 2>/dev/null ||
        die "python ($PYTHON) lacks confluent_kafka/minio; run: pip install -e '.[server,dev]' (or set PYTHON)"
    mkdir -p "$STATE_DIR" && "$PYTHON" -c 'import sys; print(sys.executable)' >"$PYTHON_FILE"
}

# --- processes ---------------------------------------------------------------------------------

# Prints the pid recorded in $1 if that process is alive and its command line contains $2.
live_pid() {
    local file=$1 marker=$2 pid cmd
    [[ -f "$file" ]] || return 1
    pid="$(tr -dc '0-9' <"$file")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
    cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmd" == *"$marker"* ]] || return 1
    printf '%s\n' "$pid"
}

# Removes a pid file whose process is gone (or is some unrelated process that reused the pid).
clear_stale_pid() {
    local file=$1 marker=$2
    if [[ -f "$file" ]] && ! live_pid "$file" "$marker" >/dev/null; then
        rm -f "$file"
        log "  (removed stale pid file $file)"
    fi
}

port_open() {
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# Prints the pid listening on tcp port $1, if `ss` can tell.
port_owner() {
    command -v ss >/dev/null || return 0
    ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2
}

# Starts "$@" detached in its own session (so it outlives this shell and the caller's job),
# appending output to $2 and recording its pid in $1.
spawn() {
    local pidfile=$1 logfile=$2
    shift 2
    # The inner shell writes its own pid and then execs, so the recorded pid is the service.
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$pidfile" "$@" </dev/null >>"$logfile" 2>&1 &
    local i
    for i in $(seq 50); do
        [[ -s "$pidfile" ]] && return 0
        sleep 0.1
    done
    die "could not start $*"
}

# SIGTERM, wait up to $3 seconds, then SIGKILL. A stopped (SIGSTOPped) process is continued so
# it can act on the SIGTERM.
stop_pid() {
    local file=$1 marker=$2 grace=$3 pid i
    if ! pid="$(live_pid "$file" "$marker")"; then
        rm -f "$file"
        return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true
    for i in $(seq $((grace * 10))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "  pid $pid ignored SIGTERM for ${grace}s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for i in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -f "$file"
}

proc_state() {
    awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true
}

# --- Kafka -------------------------------------------------------------------------------------

kafka_classpath() {
    local pom="$LOCAL_DIR/kafka/pom.xml" cp_file="$KAFKA_CONF_DIR/classpath.txt"
    if [[ -s "$cp_file" && "$cp_file" -nt "$pom" ]]; then
        local jar missing=0
        while IFS= read -r jar; do
            [[ -f "$jar" ]] || missing=1
        done < <(tr ':' '\n' <"$cp_file")
        [[ $missing == 0 ]] && return 0
    fi
    command -v mvn >/dev/null || die "mvn not found (needed to resolve Kafka $KAFKA_VERSION from Maven Central)"
    local t0=$SECONDS
    log "kafka: resolving org.apache.kafka:kafka_2.13:$KAFKA_VERSION with mvn"
    mvn -q -B -Dstyle.color=never -f "$pom" dependency:build-classpath \
        -Dmdep.includeScope=runtime -Dmdep.outputFile="$cp_file.tmp" >"$LOG_DIR/mvn.log" 2>&1 ||
        {
            tail -n 30 "$LOG_DIR/mvn.log" >&2
            die "mvn failed (log: $LOG_DIR/mvn.log)"
        }
    mv "$cp_file.tmp" "$cp_file"
    log "kafka: classpath resolved in $((SECONDS - t0))s"
}

kafka_configure() {
    cat >"$KAFKA_CONF_DIR/server.properties" <<EOF
# Generated by deploy/local/lib.sh; edits are overwritten on the next up.sh.
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT,CONTROLLER://$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$KAFKA_HOST:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.bootstrap.servers=$KAFKA_HOST:$KAFKA_CONTROLLER_PORT
log.dirs=$KAFKA_DATA
num.partitions=4
default.replication.factor=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
message.max.bytes=1048588
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.retention.hours=168
EOF
    cat >"$KAFKA_CONF_DIR/log4j2.properties" <<'EOF'
# Generated by deploy/local/lib.sh. Kafka 4.x logs through slf4j -> log4j2.
status = warn
name = blackbox-local-kafka
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/kafka-server.log
appender.file.filePattern = ${sys:kafka.logs.dir}/kafka-server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.statechange.name = state.change.logger
logger.statechange.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
EOF
}

kafka_format() {
    [[ -f "$KAFKA_DATA/meta.properties" ]] && return 0
    local cluster_id_file="$KAFKA_CONF_DIR/cluster-id" cp
    if [[ ! -s "$cluster_id_file" ]]; then
        "$PYTHON" -c 'import base64, uuid; print(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))' \
            >"$cluster_id_file"
    fi
    cp="$(cat "$KAFKA_CONF_DIR/classpath.txt")"
    log "kafka: formatting $KAFKA_DATA (cluster id $(cat "$cluster_id_file"))"
    java -cp "$cp" -Dlog4j2.configurationFile="$KAFKA_CONF_DIR/log4j2.properties" \
        -Dkafka.logs.dir="$LOG_DIR" kafka.tools.StorageTool format \
        --config "$KAFKA_CONF_DIR/server.properties" --cluster-id "$(cat "$cluster_id_file")" \
        --standalone --ignore-formatted >>"$LOG_DIR/kafka-format.log" 2>&1 ||
        {
            tail -n 30 "$LOG_DIR/kafka-format.log" >&2
            die "kafka storage format failed (log: $LOG_DIR/kafka-format.log)"
        }
}

kafka_install() {
    ensure_dirs
    command -v java >/dev/null || die "java not found (Kafka $KAFKA_VERSION needs Java 17+)"
    kafka_classpath
    kafka_configure
    kafka_format
}

kafka_wait_ready() {
    local timeout=${1:-120} pid
    pid="$(live_pid "$KAFKA_PID" kafka.Kafka)" || true
    "$PYTHON" "$SVC_PY" kafka-ready --bootstrap "$KAFKA_HOST:$KAFKA_PORT" --timeout "$timeout" \
        --pid "${pid:-0}" || {
        tail -n 40 "$LOG_DIR/kafka-server.log" "$LOG_DIR/kafka.out" >&2 2>/dev/null || true
        die "kafka did not become ready within ${timeout}s (logs: $LOG_DIR/kafka-server.log, kafka.out)"
    }
}

kafka_start() {
    local pid t0=$SECONDS
    clear_stale_pid "$KAFKA_PID" kafka.Kafka
    if pid="$(live_pid "$KAFKA_PID" kafka.Kafka)"; then
        kafka_wait_ready 120
        "$PYTHON" "$SVC_PY" kafka-topics --bootstrap "$KAFKA_HOST:$KAFKA_PORT" "${KAFKA_TOPICS[@]}"
        log "kafka: running (reused) pid $pid on $KAFKA_HOST:$KAFKA_PORT"
        return 0
    fi
    for port in $KAFKA_PORT $KAFKA_CONTROLLER_PORT; do
        if port_open "$KAFKA_HOST" "$port"; then
            die "port $KAFKA_HOST:$port is taken by another process (pid $(port_owner "$port")), not ours; stop it first"
        fi
    done
    kafka_install
    local cp
    cp="$(cat "$KAFKA_CONF_DIR/classpath.txt")"
    # shellcheck disable=SC2086  # KAFKA_HEAP is a list of JVM flags
    spawn "$KAFKA_PID" "$LOG_DIR/kafka.out" java $KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
        -Dkafka.logs.dir="$LOG_DIR" -Dlog4j2.configurationFile="$KAFKA_CONF_DIR/log4j2.properties" \
        -cp "$cp" kafka.Kafka "$KAFKA_CONF_DIR/server.properties"
    kafka_wait_ready 120
    "$PYTHON" "$SVC_PY" kafka-topics --bootstrap "$KAFKA_HOST:$KAFKA_PORT" "${KAFKA_TOPICS[@]}"
    log "kafka: started pid $(cat "$KAFKA_PID") on $KAFKA_HOST:$KAFKA_PORT in $((SECONDS - t0))s"
}

kafka_stop() {
    if live_pid "$KAFKA_PID" kafka.Kafka >/dev/null; then
        stop_pid "$KAFKA_PID" kafka.Kafka 60
        log "kafka: stopped"
    else
        rm -f "$KAFKA_PID"
        log "kafka: not running"
    fi
}

kafka_status() {
    local pid
    if pid="$(live_pid "$KAFKA_PID" kafka.Kafka)"; then
        if ! "$PYTHON" -c 'import confluent_kafka' 2>/dev/null; then
            log "kafka: pid $pid alive; cannot ask it: $PYTHON lacks confluent_kafka (set PYTHON to the interpreter test.sh used)"
            return 1
        fi
        if "$PYTHON" "$SVC_PY" kafka-ready --bootstrap "$KAFKA_HOST:$KAFKA_PORT" --timeout 5 --quiet; then
            log "kafka: running pid $pid on $KAFKA_HOST:$KAFKA_PORT (pid file $KAFKA_PID)"
        else
            log "kafka: pid $pid alive but not answering on $KAFKA_HOST:$KAFKA_PORT"
            return 1
        fi
    else
        log "kafka: stopped"
        return 1
    fi
}

# --- MinIO -------------------------------------------------------------------------------------

minio_binary_ok() {
    [[ -x "$BIN_DIR/minio" ]] || return 1
    local info
    # Captured first: `grep -q` on a pipe could SIGPIPE `go` and, under pipefail, read as "no".
    info="$(go version -m "$BIN_DIR/minio" 2>/dev/null)" || return 1
    grep -Eq "^[[:space:]]+mod[[:space:]]+$MINIO_MODULE[[:space:]]+$MINIO_VERSION([[:space:]]|$)" <<<"$info"
}

minio_install() {
    ensure_dirs
    command -v go >/dev/null || die "go not found (MinIO is built from source with go install)"
    minio_binary_ok && return 0
    local t0=$SECONDS
    log "minio: building $MINIO_MODULE@$MINIO_VERSION with go install (a few minutes on 2 cores)"
    GOBIN="$BIN_DIR" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
        go install "$MINIO_MODULE@$MINIO_VERSION" >"$LOG_DIR/minio-build.log" 2>&1 ||
        {
            tail -n 30 "$LOG_DIR/minio-build.log" >&2
            die "minio build failed (log: $LOG_DIR/minio-build.log)"
        }
    minio_binary_ok || die "minio build produced no binary matching $MINIO_VERSION"
    log "minio: built in $((SECONDS - t0))s"
}

minio_wait_ready() {
    local timeout=${1:-60} pid
    pid="$(live_pid "$MINIO_PID" "minio server")" || true
    "$PYTHON" "$SVC_PY" minio-ready --endpoint "$MINIO_HOST:$MINIO_PORT" --timeout "$timeout" \
        --pid "${pid:-0}" || {
        tail -n 40 "$LOG_DIR/minio.log" >&2 2>/dev/null || true
        die "minio did not become ready within ${timeout}s (log: $LOG_DIR/minio.log)"
    }
}

minio_bucket() {
    "$PYTHON" "$SVC_PY" minio-bucket --endpoint "$MINIO_HOST:$MINIO_PORT" --access-key "$MINIO_USER" \
        --secret-key "$MINIO_PASSWORD" --bucket "$MINIO_BUCKET"
}

minio_start() {
    local pid t0=$SECONDS
    clear_stale_pid "$MINIO_PID" "minio server"
    if pid="$(live_pid "$MINIO_PID" "minio server")"; then
        if [[ "$(proc_state "$pid")" == T ]]; then
            kill -CONT "$pid"
            log "  (minio pid $pid was paused; resumed it)"
        fi
        minio_wait_ready 60
        minio_bucket
        log "minio: running (reused) pid $pid on $MINIO_HOST:$MINIO_PORT"
        return 0
    fi
    for port in $MINIO_PORT $MINIO_CONSOLE_PORT; do
        if port_open "$MINIO_HOST" "$port"; then
            die "port $MINIO_HOST:$port is taken by another process (pid $(port_owner "$port")), not ours; stop it first"
        fi
    done
    minio_install
    spawn "$MINIO_PID" "$LOG_DIR/minio.log" env MINIO_ROOT_USER="$MINIO_USER" \
        MINIO_ROOT_PASSWORD="$MINIO_PASSWORD" MINIO_UPDATE=off MINIO_BROWSER=on \
        "$BIN_DIR/minio" server --address "$MINIO_HOST:$MINIO_PORT" \
        --console-address "$MINIO_HOST:$MINIO_CONSOLE_PORT" "$MINIO_DATA"
    minio_wait_ready 60
    minio_bucket
    log "minio: started pid $(cat "$MINIO_PID") on $MINIO_HOST:$MINIO_PORT in $((SECONDS - t0))s"
}

minio_stop() {
    if live_pid "$MINIO_PID" "minio server" >/dev/null; then
        stop_pid "$MINIO_PID" "minio server" 20
        log "minio: stopped"
    else
        rm -f "$MINIO_PID"
        log "minio: not running"
    fi
}

minio_pause() {
    local pid
    pid="$(live_pid "$MINIO_PID" "minio server")" || die "minio is not running"
    kill -STOP "$pid"
    # A group stop is asynchronous: wait until every thread is stopped.
    local i task
    for i in $(seq 100); do
        task=$(awk '$3 != "T" && $3 != "t"' /proc/"$pid"/task/*/stat 2>/dev/null || true)
        [[ -z "$task" ]] && break
        sleep 0.05
    done
    log "minio: paused pid $pid (SIGSTOP)"
}

minio_resume() {
    local pid
    pid="$(live_pid "$MINIO_PID" "minio server")" || die "minio is not running"
    kill -CONT "$pid"
    minio_wait_ready 30
    log "minio: resumed pid $pid"
}

minio_status() {
    local pid
    if pid="$(live_pid "$MINIO_PID" "minio server")"; then
        if [[ "$(proc_state "$pid")" == T ]]; then
            log "minio: paused (SIGSTOP) pid $pid on $MINIO_HOST:$MINIO_PORT"
            return 1
        elif "$PYTHON" "$SVC_PY" minio-ready --endpoint "$MINIO_HOST:$MINIO_PORT" --timeout 5 --quiet; then
            log "minio: running pid $pid on $MINIO_HOST:$MINIO_PORT (pid file $MINIO_PID)"
        else
            log "minio: pid $pid alive but not ready on $MINIO_HOST:$MINIO_PORT"
            return 1
        fi
    else
        log "minio: stopped"
        return 1
    fi
}
