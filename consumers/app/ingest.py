"""``python -m consumers.app.ingest [--drain] [--batch-size N] [--max-wait S] [--database DB]``.

The same consumer as ``blackbox consume``, without the CLI package around it: used by the crash
tests, which run it as a subprocess (``BLACKBOX_FAULT`` kills it at a named point) and need to
point it at a per-test index database. Prints the run's stats as one JSON line on stdout. It lives
in the app room, above ingest, because it opens the runtime.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict

from consumers.app.runtime import open_runtime
from consumers.ingest.service import parse_kafka_options
from consumers.ingest.signals import stop_on_signals
from schemas.errors import BlackboxError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m consumers.app.ingest")
    parser.add_argument("--drain", action="store_true", help="stop once caught up")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--max-wait", type=float, default=1.0)
    parser.add_argument("--database", default=None, help="index database (default: blackbox)")
    parser.add_argument("--max-batches", type=int, default=None)
    parser.add_argument("--workers", type=int, default=0, help="worker processes for decode + verify")
    parser.add_argument(
        "--kafka-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra librdkafka consumer property (repeatable), e.g. session.timeout.ms=6000",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    try:
        with (
            open_runtime(database=args.database) as rt,
            rt.ingest(
                batch_size=args.batch_size,
                max_wait=args.max_wait,
                kafka_config=parse_kafka_options(args.kafka_option),
                workers=args.workers,
            ) as service,
            stop_on_signals(service.stop),
        ):
            stats = service.run(drain=args.drain, max_batches=args.max_batches)
    except BlackboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    summary = asdict(stats)
    dead_files = getattr(service.source, "dead_files", None)  # unreadable spool files moved aside
    if dead_files is not None:
        summary["dead_lettered_files"] = dead_files
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
