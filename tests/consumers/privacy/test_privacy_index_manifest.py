"""``decisions.manifest_json`` holds an index view: origin ids as keyed hashes, the originals sealed.

The signed manifest names the person (``input.originUserId``); the index must not. Ingest writes the
view; everything that needs the signed bytes (verify of a compacted decision, the transparency-log
audit, the counterparty gate) unseals it with the index id key. Rows written before views (the signed
manifest itself) still read and verify.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_privacy_cli import EMAIL, PHONE, _cli, _consume, _record, _show

from consumers.index import ChdbIndex
from consumers.ingest.prepare import manifest_json
from consumers.privacy.ids import IndexIdKeyError, IndexIds
from consumers.privacy.manifest import INDEX_VIEW, index_manifest_json, signed_manifest
from producers.evidence import Signer
from producers.privacy.identifiers import is_commitment

KEY = IndexIds(b"k" * 32)


def _capture(user: str = "cus_jane", session: str | None = "sess_42") -> dict[str, Any]:
    example = Path(__file__).resolve().parents[3] / "schemas" / "examples" / "capture.unsealed.json"
    capture = json.loads(example.read_text("utf-8"))
    capture["input"]["originUserId"] = user
    capture["input"]["originSessionId"] = session
    capture["signature"]["signatureBytes"] = "c2lnbmVk"
    return capture


def test_the_view_hides_the_ids_and_unseals_to_the_signed_manifest() -> None:
    capture = _capture()
    view = index_manifest_json(capture, KEY)
    assert "cus_jane" not in view and "sess_42" not in view
    parsed = json.loads(view)
    assert parsed["input"]["originUserId"] == KEY.of("cus_jane")
    assert parsed["input"]["originSessionId"] == KEY.of("sess_42")
    assert index_manifest_json(capture, KEY) == view  # deterministic: a redelivery writes the same row
    assert capture["input"]["originUserId"] == "cus_jane"  # the capture itself is untouched
    # unsealed, it is exactly the signed manifest (what the previous release stored)
    assert signed_manifest(view, KEY) == json.loads(manifest_json(capture))
    # opted out (raw ids): the signed manifest itself, byte for byte as before
    assert index_manifest_json(capture, IndexIds(None)) == manifest_json(capture)
    # a row from before views reads as it is, with or without the key
    assert signed_manifest(manifest_json(capture), KEY) == json.loads(manifest_json(capture))
    assert signed_manifest(manifest_json(capture), None) == json.loads(manifest_json(capture))
    assert signed_manifest("", KEY) == {}
    # no origin id: nothing to seal
    assert INDEX_VIEW not in json.loads(index_manifest_json(_capture("", None), KEY))


def test_a_view_does_not_open_without_its_key_or_when_edited() -> None:
    view = index_manifest_json(_capture(), KEY)
    with pytest.raises(IndexIdKeyError, match="needs the index id key"):
        signed_manifest(view, None)
    with pytest.raises(IndexIdKeyError, match="do not open under the index id key"):
        signed_manifest(view, IndexIds(b"x" * 32))
    moved = json.loads(view)
    moved["decisionId"] = "dec_other"  # the sealed ids are bound to their decision
    with pytest.raises(IndexIdKeyError, match="do not open"):
        signed_manifest(json.dumps(moved), KEY)
    swapped = json.loads(view)
    swapped["input"]["originUserId"] = KEY.of("cus_john")  # the hash no longer matches what is sealed
    with pytest.raises(IndexIdKeyError, match=r"does not match its sealed input\.originUserId"):
        signed_manifest(json.dumps(swapped), KEY)


def _new_version(index: ChdbIndex, decision_id: str, **columns: Any) -> None:
    """A new row version with ``columns`` replaced (what compaction or an old release would have written)."""
    sets = ", ".join(f"{{{c}:String}} AS {c}" for c in columns)
    index.command(
        f"INSERT INTO decisions SELECT * REPLACE ({sets}, version + 1 AS version) "
        "FROM decisions FINAL WHERE decision_id = {id:String}",
        {"id": decision_id, **{c: str(v) for c, v in columns.items()}},
    )


@pytest.mark.timeout(240)
def test_compacted_and_old_rows_verify_from_the_index(
    data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    ids = _record(data, signer, "cus_jane", "cus_old")
    jane, old = ids["cus_jane"], ids["cus_old"]
    _consume(env)
    rows = {
        r["decision_id"]: r for r in index.query("SELECT decision_id, manifest_json FROM decisions FINAL")
    }
    for did in (jane, old):
        text = rows[did]["manifest_json"]
        assert "cus_" not in text and EMAIL not in text and PHONE not in text
        assert json.loads(text)[INDEX_VIEW]["sealed"]

    # compacted: the segment is gone, the signature is checked over the unsealed manifest
    _new_version(index, jane, content_state="metadata-only", segment_key="")
    verified = _cli(env, "verify", jane)
    assert verified.exit_code == 0 and verified.output.startswith(f"verified: {jane}"), verified.output
    shown = _show(env, jane)
    assert shown["verification"]["verdict"] == "verified", shown["verification"]
    # the signed manifest, as before; it signs the person only as a salted commitment (DESIGN 16)
    assert is_commitment(shown["capture"]["input"]["originUserId"]) and "cus_jane" not in json.dumps(shown)

    # a row the previous release wrote (the signed manifest itself) reads and verifies as before
    key = IndexIds((data / "index_id.key").read_bytes())
    signed = json.dumps(
        signed_manifest(rows[old]["manifest_json"], key), ensure_ascii=False, separators=(",", ":")
    )
    _new_version(index, old, manifest_json=signed)
    assert _cli(env, "verify", old).exit_code == 0
    _new_version(index, old, content_state="metadata-only", segment_key="")
    assert _cli(env, "verify", old).exit_code == 0

    # an index view whose sealed ids were tampered with does not verify, and names the column
    tampered = json.loads(rows[jane]["manifest_json"])
    tampered[INDEX_VIEW]["sealed"] = tampered[INDEX_VIEW]["sealed"][:-8] + "AAAAAAA="
    _new_version(index, jane, manifest_json=json.dumps(tampered))
    failed = _cli(env, "verify", jane)
    assert failed.exit_code != 0 and "index.decisions.manifest_json" in failed.output, failed.output
