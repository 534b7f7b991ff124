"""Readiness checks and idempotent setup for the local services, called by deploy/local/lib.sh.

Subcommands:
  kafka-ready   --bootstrap H:P --timeout S [--pid N] [--quiet]   wait until the broker answers metadata
  kafka-topics  --bootstrap H:P NAME:PARTITIONS...                 create topics that are missing
  minio-ready   --endpoint H:P --timeout S [--pid N] [--quiet]    wait for /minio/health/ready
  minio-bucket  --endpoint H:P --access-key K --secret-key S --bucket B   create the bucket if missing

A non-zero --pid makes the wait give up as soon as that process dies, instead of timing out.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kafka_answers(bootstrap: str, timeout: float) -> bool:
    """True when the broker at ``bootstrap`` answers a metadata request and has a controller."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000, "log_level": 0})
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException:
        return False
    return bool(meta.brokers) and meta.controller_id >= 0


def minio_answers(endpoint: str, timeout: float) -> bool:
    """True when MinIO's readiness probe answers 200."""
    try:
        with urllib.request.urlopen(f"http://{endpoint}/minio/health/ready", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _wait(check: str, probe: Callable[[float], bool], *, timeout: float, pid: int, quiet: bool) -> int:
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if probe(max(1.0, min(5.0, remaining))):
            return 0
        if not _alive(pid):
            if not quiet:
                print(f"{check}: process {pid} exited while starting", file=sys.stderr)
            return 1
        if time.monotonic() >= deadline:
            if not quiet:
                print(f"{check}: not ready after {timeout:.0f}s", file=sys.stderr)
            return 1
        time.sleep(0.5)


def create_topics(bootstrap: str, specs: list[str]) -> int:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    existing = set(admin.list_topics(timeout=15).topics)
    wanted = []
    for spec in specs:
        name, _, partitions = spec.partition(":")
        if name not in existing:
            wanted.append(NewTopic(name, num_partitions=int(partitions or 1), replication_factor=1))
    if not wanted:
        return 0
    for name, future in admin.create_topics(wanted, request_timeout=30).items():
        try:
            future.result(timeout=30)
            print(f"  created topic {name}")
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                print(f"kafka-topics: creating {name} failed: {exc}", file=sys.stderr)
                return 1
    return 0


def create_bucket(endpoint: str, access_key: str, secret_key: str, bucket: str) -> int:
    from minio import Minio
    from minio.error import S3Error

    client = Minio(endpoint, access_key=access_key, secret_key=secret_key, secure=False)
    if client.bucket_exists(bucket):
        return 0
    try:
        client.make_bucket(bucket)
        print(f"  created bucket {bucket}")
    except S3Error as exc:
        if exc.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="svc.py")
    sub = parser.add_subparsers(dest="cmd", required=True)
    kr = sub.add_parser("kafka-ready")
    kr.add_argument("--bootstrap", required=True)
    kr.add_argument("--timeout", type=float, default=60)
    kr.add_argument("--pid", type=int, default=0)
    kr.add_argument("--quiet", action="store_true")
    kt = sub.add_parser("kafka-topics")
    kt.add_argument("--bootstrap", required=True)
    kt.add_argument("topics", nargs="+")
    mr = sub.add_parser("minio-ready")
    mr.add_argument("--endpoint", required=True)
    mr.add_argument("--timeout", type=float, default=60)
    mr.add_argument("--pid", type=int, default=0)
    mr.add_argument("--quiet", action="store_true")
    mb = sub.add_parser("minio-bucket")
    mb.add_argument("--endpoint", required=True)
    mb.add_argument("--access-key", required=True)
    mb.add_argument("--secret-key", required=True)
    mb.add_argument("--bucket", required=True)
    args = parser.parse_args(argv)

    if args.cmd == "kafka-ready":
        return _wait(
            "kafka",
            lambda t: kafka_answers(args.bootstrap, t),
            timeout=args.timeout,
            pid=args.pid,
            quiet=args.quiet,
        )
    if args.cmd == "kafka-topics":
        return create_topics(args.bootstrap, args.topics)
    if args.cmd == "minio-ready":
        return _wait(
            "minio",
            lambda t: minio_answers(args.endpoint, t),
            timeout=args.timeout,
            pid=args.pid,
            quiet=args.quiet,
        )
    return create_bucket(args.endpoint, args.access_key, args.secret_key, args.bucket)


if __name__ == "__main__":
    sys.exit(main())
