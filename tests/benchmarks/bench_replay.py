"""Replay benchmark (not collected by pytest): load + verify + rebuild latency, and regress throughput.

    python tests/benchmarks/bench_replay.py [--captures 1000] [--samples 300] [--workers 4] [--minio]

With a model that answers instantly (the scripted model in-process, ``CallableModelClient``):

* **prepare p50/p99** — ``Replayer.prepare``: load one capture, pass the access gate (one row into the
  real chdb ``access_log``), verify signature + content hashes against the trust store, rebuild the
  request and check its hashes. Target p50 < 30 ms. From a directory of JSON files, and with
  ``--minio`` also from ingest's layout (index row → range GET on MinIO → zstd frame → decode).
  The components are timed separately beside it.
* **regress** over ``--captures`` sealed captures (each ~25 KB of JSON, 3 tool calls + final answer)
  as captured and under a prompt variation. Target >= 50 replays/s. Beside it, the floor: the same
  agent loop against the same model with no gate, no verification, no hashing, no sandbox.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REPLAY_TESTS = ROOT / "tests" / "consumers" / "replay"
sys.path[:0] = [str(ROOT), str(REPLAY_TESTS)]

from make_goldens import golden_signer
from replay_scripted import ScriptedModel, memory_entries, record_decision, system_prompt

from consumers.access import AccessGate, Caller, IndexAccessLog
from consumers.index import ChdbIndex, decision_rows
from consumers.ingest.store import insert_captures
from consumers.replay import (
    CallableModelClient,
    EvidenceVerifier,
    FileCaptureSource,
    IndexedCaptureSource,
    IndexReplayRunLog,
    Replayer,
    parse_variation,
    rebuild_request,
    regress,
)
from producers.evidence import TrustStore, seal
from producers.wire.openai_chat import tool_message_content


def build_captures(n: int) -> list[dict[str, Any]]:
    signer = golden_signer()
    base = record_decision(decision_id="dec_bench_base")
    small = record_decision(decision_id="dec_bench_small", entries=memory_entries(count=3))
    out = []
    for i in range(n):
        capture = json.loads(json.dumps(small if i % 3 == 2 else base))
        capture["decisionId"] = f"dec_bench_{i:05d}"
        out.append(seal(capture, signer))
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def time_each(fn: Callable[[str], Any], ids: list[str]) -> list[float]:
    samples = []
    for decision_id in ids:
        start = time.perf_counter()
        fn(decision_id)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def report(label: str, samples: list[float]) -> None:
    print(
        f"  {label:<44} p50 {statistics.median(samples):7.2f} ms   p99 {percentile(samples, 0.99):7.2f} ms"
        f"   (n={len(samples)})"
    )


def floor_replays_per_second(captures: list[dict[str, Any]]) -> float:
    """The same agent loop and model with nothing of replay around it: no gate, verify, hashing, sandbox."""
    model = ScriptedModel()
    start = time.perf_counter()
    for capture in captures:
        config = capture["agentConfiguration"]
        answers = {c["sequence"]: c["output"] for c in capture["executionTrace"]["toolCalls"]}
        messages = json.loads(capture["renderedContext"]["text"])
        request = {
            "model": config["modelIdentifier"],
            "tools": config["toolSchemaJson"]["tools"],
            **config["samplingParameters"],
        }
        calls = 0
        while True:
            body = json.dumps({**request, "messages": messages})  # what a client would send
            reply = model(json.loads(body))["choices"][0]["message"]
            messages.append(reply)
            if not reply.get("tool_calls"):
                break
            for call in reply["tool_calls"]:
                calls += 1
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": tool_message_content(answers.get(calls)),
                    }
                )
    return len(captures) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--captures", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--minio", action="store_true", help="also measure from MinIO at 127.0.0.1:9000")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-replay-"))
    index = ChdbIndex(work / "chdb", database="bench")
    index.ensure_schema()
    try:
        t0 = time.perf_counter()
        captures = build_captures(args.captures)
        files = work / "captures"
        files.mkdir()
        sizes = []
        for capture in captures:
            text = json.dumps(capture, ensure_ascii=False, separators=(",", ":"))
            sizes.append(len(text.encode("utf-8")))
            (files / f"{capture['decisionId']}.json").write_text(text, encoding="utf-8")
        print(
            f"{len(captures)} sealed captures, median {statistics.median(sizes) / 1024:.1f} KB JSON "
            f"(built in {time.perf_counter() - t0:.1f}s)"
        )

        signer = golden_signer()
        trust = TrustStore()
        trust.add(signer.public_raw, not_before=datetime(2026, 1, 1, tzinfo=UTC))
        verifier = EvidenceVerifier(trust)
        gate = AccessGate(log=IndexAccessLog(index))
        caller = Caller(identity="bench", scope="operator", reason="benchmark")
        source = FileCaptureSource(files)

        def replayer_for(src: Any) -> Replayer:
            return Replayer(
                source=src,
                client=CallableModelClient(ScriptedModel()),
                gate=gate,
                caller=caller,
                verifier=verifier,
            )

        ids = [c["decisionId"] for c in captures]
        sample_ids = ids[: args.samples]
        by_id = {c["decisionId"]: c for c in captures}

        print("\nload + verify + rebuild (Replayer.prepare), target p50 < 30 ms")
        replayer = replayer_for(source)
        replayer.prepare(ids[0])  # warm up
        report("prepare, file source (incl. access-log insert)", time_each(replayer.prepare, sample_ids))
        report("  load (file, json.loads)", time_each(source.load, sample_ids))
        report(
            "  access gate (one chdb insert)",
            time_each(lambda d: gate.authorize(caller, by_id[d]), sample_ids),
        )
        report(
            "  verify (signature + content hashes)",
            time_each(lambda d: verifier.verify(by_id[d]), sample_ids),
        )
        report("  rebuild + hash checks", time_each(lambda d: rebuild_request(by_id[d]), sample_ids))

        if args.minio:
            store = _minio_store()
            prefix = f"bench-replay-{uuid.uuid4().hex[:8]}"
            _ingest_to(index, store, captures, prefix)
            indexed = IndexedCaptureSource(index, store)
            replayer_minio = replayer_for(indexed)
            replayer_minio.prepare(ids[0])
            report("prepare, MinIO segments + chdb index", time_each(replayer_minio.prepare, sample_ids))
            report("  load (index row + range GET + zstd + decode)", time_each(indexed.load, sample_ids))

        print(
            f"\nregress over {len(ids)} captures, {args.workers} workers, instant model; target >= 50 replays/s"
        )
        floor = floor_replays_per_second(captures)
        print(f"  floor (bare agent loop + model, nothing else)   {floor:8.1f} replays/s")
        for label, config in (
            ("as captured", ()),
            ("system_prompt=v4.6", (parse_variation("system_prompt=text:" + system_prompt("v4.6")),)),
        ):
            result = regress(
                replayer_for(source),
                ids,
                configuration=config,
                workers=args.workers,
                run_log=IndexReplayRunLog(index),
                progress=False,
            )
            print(
                f"  regress {label:<38} {result.replays_per_second:8.1f} replays/s "
                f"({result.seconds:.2f}s; {result.counts})"
            )
        rows = index.query("SELECT count() AS n FROM replay_runs")[0]["n"]
        print(f"  replay_runs rows written: {rows}")
    finally:
        index.close()
        shutil.rmtree(work, ignore_errors=True)


def _minio_store() -> Any:
    from producers.blobstore import S3BlobStore

    return S3BlobStore("127.0.0.1:9000", "blackbox", "blackbox-secret", "blackbox", False)


def _ingest_to(index: ChdbIndex, store: Any, captures: list[dict[str, Any]], prefix: str) -> None:
    from consumers.ingest import manifest_json
    from consumers.storage.segments import SegmentWriter
    from schemas.codec import encode_capture

    for start in range(0, len(captures), 200):
        chunk = captures[start : start + 200]
        writer = SegmentWriter(retention_class="consequential", topic=prefix, partition=0, first_offset=start)
        encoded = [encode_capture(c) for c in chunk]
        for data in encoded:
            writer.append(data)
        key, body = writer.finish()
        store.put(key, body)
        insert_captures(
            index,
            [
                decision_rows(
                    c,
                    segment_key=loc.key,
                    segment_offset=loc.offset,
                    segment_length=loc.length,
                    capture_bytes=len(data),
                    content_sha256="sha256:" + hashlib.sha256(data).hexdigest(),
                    manifest_json=manifest_json(c),
                )
                for c, data, loc in zip(chunk, encoded, writer.locations(), strict=True)
            ],
        )


if __name__ == "__main__":
    main()
