"""Property: whatever arrives in the spool, every good capture after it is indexed and verifies.

Hypothesis interleaves good captures with valid-but-extreme ones (huge or negative ``retentionDays``,
``capturedAt`` from year 1 to 9999, huge strings, odd Unicode, empty lists, deeply nested JSON,
out-of-range integers), invalid messages (random bytes, a wrong schema fingerprint, truncated Avro)
and invalid spool files (random bytes, truncated real spool files, a foreign Avro file), publishes
them as spool files and runs the embedded ingest until caught up. Then:

- every good capture is indexed and verifies end to end, byte for byte;
- every extreme capture is either indexed (and verifies) or quarantined with a reason;
- every invalid message is a dead letter with a reason, every invalid file is in ``dead-letter/``
  with its ``.reason.json``; the readable records of a truncated file are indexed, the rest are not.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ingest_testdata import chdb_index, make_capture, new_signer

from consumers.app.settings import load_service_settings
from consumers.index import ChdbIndex
from consumers.ingest.loop import LoopConfig
from consumers.ingest.service import build_service
from consumers.storage.reader import load_capture
from consumers.verify.stored import verify_stored
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer, TrustStore, seal
from producers.transports.spool.dead_letter import DEAD_LETTER_DIR
from producers.transports.spool.files import SPOOL_RECORD_SCHEMA
from schemas.codec import encode_capture

_ids = itertools.count()
_ODD = st.characters(exclude_categories=("Cs",))  # any code point UTF-8 can carry


# --- what to send ------------------------------------------------------------------------------------------
def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"k": value} if level % 2 else [value]
    return value


_iso = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59), timezones=st.just(UTC)
).map(lambda t: t.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
_mutation = st.one_of(
    st.tuples(st.just("replayPolicy.retentionDays"), st.integers(-(2**53) + 1, 2**53 - 1)),
    st.tuples(st.just("replayPolicy.retentionDays"), st.sampled_from([3_000_000, 2**31, 2**53 - 1, 0])),
    st.tuples(st.just("capturedAt"), _iso),
    st.tuples(
        st.just("capturedAt"), st.sampled_from(["9999-12-31T23:59:59.999Z", "0001-01-01T00:00:00.000Z"])
    ),
    st.tuples(
        st.just("executionTrace.finalOutputText"),
        st.tuples(_ODD, st.integers(0, 300_000)).map(lambda t: t[0] * t[1]),
    ),
    st.tuples(st.just("executionTrace.finalOutputText"), st.text(_ODD, max_size=200)),
    st.tuples(st.just("agentId"), st.text(_ODD, min_size=1, max_size=30)),
    st.tuples(st.just("agentConfiguration.systemPromptVersion"), st.text(_ODD, max_size=30)),
    st.tuples(
        st.sampled_from(
            [
                "executionTrace.toolCalls",
                "executionTrace.reasoningTokens",
                "externalState.observableExternals",
                "memoryState.workingSetEntries",
            ]
        ),
        st.just([]),
    ),
    st.tuples(st.just("input.requestPayload"), st.integers(1, 250).map(lambda d: {"deep": _deep(d)})),
    st.tuples(st.just("executionTrace.totalLatencyMs"), st.integers(-(2**53) + 1, 2**53 - 1)),
    st.tuples(st.just("executionTrace.reasoningTokenCount"), st.integers(-(2**31), 2**53 - 1)),
)
_message = st.one_of(
    st.tuples(st.just("random"), st.binary(max_size=300)),
    st.tuples(st.just("fingerprint"), st.binary(min_size=8, max_size=8)),
    st.tuples(st.just("truncated"), st.floats(0.0, 0.99)),
)
_file = st.one_of(
    st.tuples(st.just("random"), st.binary(max_size=2000)),
    st.tuples(st.just("truncated"), st.floats(0.0, 0.999)),
    st.tuples(st.just("foreign"), st.just(0)),
)
_item = st.one_of(
    st.tuples(st.just("good"), st.just(None)),
    st.tuples(st.just("extreme"), st.lists(_mutation, min_size=1, max_size=3)),
    st.tuples(st.just("bad_message"), _message),
    st.tuples(st.just("bad_file"), _file),
)
_plan = st.lists(_item, min_size=1, max_size=10).map(lambda items: [*items, ("good", None)])


# --- sending it --------------------------------------------------------------------------------------------
@dataclass
class Sent:
    good: dict[str, dict[str, Any]] = field(default_factory=dict)
    extreme: dict[str, dict[str, Any]] = field(default_factory=dict)
    bad_messages: list[bytes] = field(default_factory=list)
    bad_files: list[str] = field(default_factory=list)
    truncated: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # file -> its captures


def _capture(signer: Signer, mutations: list[tuple[str, Any]] | None = None) -> dict[str, Any] | None:
    n = next(_ids)
    c = make_capture(n, tag="prop")
    c["decisionId"] = f"dec_prop_{n:06d}"
    for path, value in mutations or []:
        node = c
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = copy.deepcopy(value)
    try:
        sealed = seal(c, signer)
        encode_capture(sealed)
    except Exception:  # the producer refuses it, so it never reaches ingest
        return None
    return sealed


def _spool_file(values: list[bytes]) -> bytes:
    buf = io.BytesIO()
    records = [{"key": b"agt", "value": v, "timestamp": 0} for v in values]
    fastavro.writer(buf, fastavro.parse_schema(SPOOL_RECORD_SCHEMA), records, sync_interval=1)
    return buf.getvalue()


def _readable(data: bytes) -> int | None:
    """How many records ``data`` holds when it is a whole, valid spool file; None when it is not."""
    try:
        return len(list(fastavro.reader(io.BytesIO(data))))
    except Exception:
        return None


def _foreign() -> bytes:
    buf = io.BytesIO()
    fastavro.writer(
        buf, {"type": "record", "name": "Other", "fields": [{"name": "a", "type": "int"}]}, [{"a": 1}]
    )
    return buf.getvalue()


def _send(plan: list[tuple[str, Any]], spool: Path, signer: Signer) -> Sent:
    sent = Sent()
    names = (f"{n:013d}-prop-{n:08d}.avro" for n in itertools.count(1))
    pending: list[bytes] = []
    spool.mkdir(parents=True)

    def flush() -> None:
        if pending:
            (spool / next(names)).write_bytes(_spool_file(pending))
            pending.clear()

    for kind, arg in plan:
        if kind in ("good", "extreme"):
            capture = _capture(signer, arg)
            if capture is None:
                continue
            (sent.good if kind == "good" else sent.extreme)[capture["decisionId"]] = capture
            pending.append(encode_capture(capture))
        elif kind == "bad_message":
            how, x = arg
            real = encode_capture(_capture(signer) or {})
            if how == "random":
                value = x
            elif how == "fingerprint":
                value = real[:2] + x + real[10:]
            else:
                value = real[: int(len(real) * x)]
            sent.bad_messages.append(value)
            pending.append(value)
        else:
            flush()
            how, x = arg
            name = next(names)
            if how == "truncated":
                captures = [c for c in (_capture(signer) for _ in range(3)) if c is not None]
                whole = _spool_file([encode_capture(c) for c in captures])
                cut = whole[: int(len(whole) * x)]
                (spool / name).write_bytes(cut)
                if _readable(cut):  # cut exactly at a block boundary: a valid, shorter file
                    sent.good.update((c["decisionId"], c) for c in captures[: _readable(cut) or 0])
                    continue
                sent.truncated[name] = captures
            else:
                (spool / name).write_bytes(x if how == "random" else _foreign())
            sent.bad_files.append(name)
    flush()
    return sent


# --- the property ------------------------------------------------------------------------------------------
@pytest.fixture
def index(tmp_path: Path) -> Iterator[ChdbIndex]:
    with chdb_index(tmp_path / "chdb") as idx:
        yield idx


def test_every_good_capture_after_bad_input_is_indexed_and_verifies(tmp_path: Path, index: ChdbIndex) -> None:
    signer = new_signer()
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(1, 1, 1, tzinfo=UTC))  # extreme times reach ingest

    @settings(
        max_examples=20,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(plan=_plan)
    def run(plan: list[tuple[str, Any]]) -> None:
        data = Path(tempfile.mkdtemp(dir=tmp_path))
        conf = load_service_settings(data_dir=data, transport="spool", blob="local")
        sent = _send(plan, conf.resolved_spool_dir, signer)
        config = LoopConfig(batch_size=4, max_wait=0.01, drain_idle=0.0)
        with build_service(conf, index=index, trust=trust, loop_config=config) as service:
            service.run(drain=True)
        store = LocalBlobStore(conf.resolved_blob_dir)
        ids = [*sent.good, *sent.extreme, *(c["decisionId"] for cs in sent.truncated.values() for c in cs)]
        params = {"ids": ids}
        indexed = {
            r["decision_id"]
            for r in index.query(
                "SELECT decision_id FROM decisions WHERE decision_id IN {ids:Array(String)}", params
            )
        }
        quarantined = {
            r["decision_id"]: r["reason"]
            for r in index.query(
                "SELECT decision_id, reason FROM quarantine WHERE decision_id IN {ids:Array(String)}", params
            )
        }

        for did, capture in sent.good.items():
            assert did in indexed and did not in quarantined, (did, quarantined.get(did))
            verify_stored(did, index=index, store=store, trust=trust)
            assert load_capture(did, index=index, store=store).capture == capture
        for did in sent.extreme:
            assert (did in indexed) != (did in quarantined), did
            if did in indexed:
                verify_stored(did, index=index, store=store, trust=trust)
            else:
                assert quarantined[did]

        letters = {}
        for meta in (data / "dlq").glob("*/*.json"):
            letters[meta.with_suffix(".msg").read_bytes()] = json.loads(meta.read_text())["reason"]
        assert all(letters.get(v) for v in sent.bad_messages), (sent.bad_messages, letters)

        dead = conf.resolved_spool_dir / DEAD_LETTER_DIR
        for name in sent.bad_files:
            assert (dead / name).exists(), name
            reason = json.loads((dead / f"{name}.reason.json").read_text())
            assert reason["reason"] == "corrupt_spool_file" and reason["error"]
            if name in sent.truncated:  # what could be read was delivered, nothing else
                delivered = [c["decisionId"] for c in sent.truncated[name] if c["decisionId"] in indexed]
                assert [c["decisionId"] for c in sent.truncated[name][: reason["records_read"]]] == delivered

    run()
