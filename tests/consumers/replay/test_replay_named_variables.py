"""Variables that name what they change: versions resolved from the fleet's captures, entry-level
memory, the request, and the refusals (unknown version, a bare literal, a value equal to the capture)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_scripted import TOOL_SCHEMA, record_decision, system_prompt

from consumers.index import ChdbIndex, decision_rows
from consumers.ingest import manifest_json
from consumers.ingest.store import insert_captures, update_decisions
from consumers.replay import (
    IndexedCaptureSource,
    InvalidVariation,
    Replayer,
    parse_variation,
    replay_with_report,
)
from consumers.replay.memory_variation import working_set_bytes
from consumers.replay.replayer import NoVariation
from consumers.replay.variation import ReplayInputs, apply_variation, load_configuration
from consumers.replay.versions import IndexVersionCatalog, StaticVersionCatalog, UnknownVersion
from consumers.storage.segments import SegmentWriter
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer, seal
from schemas.codec import encode_capture


def _ingest(index: ChdbIndex, store: LocalBlobStore, captures: list[dict[str, Any]]) -> None:
    """What ingest does, minimally: one segment of zstd frames, one index row per capture."""
    writer = SegmentWriter(retention_class="consequential", topic="t", partition=0, first_offset=0)
    encoded = [encode_capture(c) for c in captures]
    for data in encoded:
        writer.append(data)
    key, body = writer.finish()
    store.put(key, body)
    insert_captures(
        index,
        [
            decision_rows(
                capture,
                segment_key=location.key,
                segment_offset=location.offset,
                segment_length=location.length,
                capture_bytes=len(data),
                content_sha256="sha256:" + hashlib.sha256(data).hexdigest(),
                manifest_json=manifest_json(capture),
            )
            for capture, data, location in zip(captures, encoded, writer.locations(), strict=True)
        ],
    )


@pytest.fixture
def fleet(
    index: ChdbIndex, signer: Signer, tmp_path: Path, make_replayer: Callable[..., Replayer]
) -> tuple[Replayer, IndexVersionCatalog]:
    """A fleet that ran prompts v4.4 (content since compacted), v4.5, v4.6 and v4.7, in the index."""
    captures = [
        seal(record_decision(decision_id=f"dec_fleet_{v}", version=v), signer)
        for v in ("v4.4", "v4.5", "v4.6", "v4.7")
    ]
    store = LocalBlobStore(tmp_path / "blobs")
    _ingest(index, store, captures)
    update_decisions(index, ["dec_fleet_v4.4"], {"content_state": "metadata-only", "segment_key": ""})
    replayer = make_replayer(source=IndexedCaptureSource(index, store))
    return replayer, IndexVersionCatalog(index, read=replayer.read)


def test_a_bare_version_is_no_longer_sent_as_the_literal_prompt() -> None:
    # Before: `system_prompt=v4.6` replayed the four characters "v4.6" as the whole prompt.
    with pytest.raises(InvalidVariation, match=r"system_prompt=v4\.6: a bare value names a version"):
        parse_variation("system_prompt=v4.6")
    assert parse_variation("system_prompt=text:v4.6").value == "v4.6"  # said explicitly, it is allowed


def test_version_names_resolve_from_the_captured_prompt_texts(
    fleet: tuple[Replayer, IndexVersionCatalog], access_log_rows: Callable[[], list[dict[str, Any]]]
) -> None:
    replayer, catalog = fleet
    known = {v.version: v.held for v in catalog.known("system_prompt")}
    assert known == {"v4.4": 0, "v4.5": 1, "v4.6": 1, "v4.7": 1}

    variation = parse_variation("system_prompt=v4.6", versions=catalog)
    assert variation.value == system_prompt("v4.6") and variation.version == "v4.6"
    assert variation.describe() == "system_prompt=v4.6"
    # Reading the text is a read of capture content: gated and logged like any replay.
    assert any(r["decision_id"] == "dec_fleet_v4.6" and r["outcome"] == "allowed" for r in access_log_rows())

    schema = parse_variation("tool_schema=support-tools-2026-07", versions=catalog)
    assert schema.value == TOOL_SCHEMA

    prepared = replayer.prepare("dec_fleet_v4.7")
    report = replay_with_report(replayer, prepared, variations=[variation])
    assert report.row("system_prompt").verdict == "outcome changed → system_prompt is implicated"


def test_each_refusal_names_what_is_wrong(fleet: tuple[Replayer, IndexVersionCatalog]) -> None:
    replayer, catalog = fleet
    with pytest.raises(UnknownVersion) as unknown:
        parse_variation("system_prompt=v9.9", versions=catalog)
    message = str(unknown.value)
    assert message.startswith("system_prompt=v9.9: not a known prompt version (known: v4.5, v4.6, v4.7")
    assert "no full capture holds the content: v4.4" in message and "text:LITERAL" in message

    with pytest.raises(UnknownVersion, match="no full capture holds the content of prompt version"):
        parse_variation("system_prompt=v4.4", versions=catalog)

    # A literal prompt without text: is read as a version name, and refused with the known ones.
    with pytest.raises(UnknownVersion, match=r"known: v4\.5, v4\.6, v4\.7"):
        parse_variation("system_prompt=You are a careful agent.", versions=catalog)

    with pytest.raises(InvalidVariation, match="model version seen in captures, not a model identifier"):
        parse_variation("model=2026-06-01", versions=catalog)
    assert parse_variation("model=acme-support-next", versions=catalog).value == "acme-support-next"

    prepared = replayer.prepare("dec_fleet_v4.7")
    for spec in ("system_prompt=v4.7", "sampling.top_p=1.0", "memory.truncate=1MB", "memory.tier=hot,warm"):
        with pytest.raises(NoVariation, match="equals the captured value"):
            replay_with_report(replayer, prepared, variations=[parse_variation(spec, versions=catalog)])


def test_a_configuration_file_names_versions_too(
    fleet: tuple[Replayer, IndexVersionCatalog], tmp_path: Path
) -> None:
    _, catalog = fleet
    config = tmp_path / "new.toml"
    config.write_text('system_prompt = "v4.6"\n[memory]\ntruncate = "4KB"\n', encoding="utf-8")
    loaded = load_configuration(config, versions=catalog)
    assert loaded["system_prompt"].value == system_prompt("v4.6")
    assert loaded["memory.truncate"].value == 4096


def _inputs(make_replayer: Callable[..., Replayer]) -> ReplayInputs:
    inputs = make_replayer().prepare("dec_golden_identical").inputs
    assert isinstance(inputs, ReplayInputs)
    return inputs


def test_memory_varies_entry_by_entry(make_replayer: Callable[..., Replayer]) -> None:
    inputs = _inputs(make_replayer)
    ids = [item.entry_id for item in inputs.memory]
    assert ids == [f"mem_{i:02d}" for i in range(10)]

    dropped = apply_variation(inputs, parse_variation("memory.drop=mem_03,mem_07"))
    assert [i.entry_id for i in dropped.memory] == [i for i in ids if i not in ("mem_03", "mem_07")]
    messages = json.loads(dropped.request.messages_text)
    assert messages[1]["content"] == "\n\n".join(i.content for i in dropped.memory)
    for item in dropped.memory:  # every kept entry still has its span, on its own bytes
        assert dropped.rendered.part_text(f"memory:{item.entry_id}") == item.content
    assert dropped.rendered.part_text("user") == inputs.rendered.part_text("user")

    hot = apply_variation(inputs, parse_variation("memory.tier=hot"))
    assert [i.entry_id for i in hot.memory] == ["mem_00", "mem_01", "mem_02"]

    cut = apply_variation(inputs, parse_variation("memory.truncate=4KB"))
    assert working_set_bytes(cut.memory) <= 4096 < working_set_bytes(inputs.memory[: len(cut.memory) + 1])
    assert len(json.loads(cut.request.messages_text)[1]["content"].encode("utf-8")) == working_set_bytes(
        cut.memory
    )

    ordered = apply_variation(inputs, parse_variation("memory.order=mem_09,mem_05"))
    assert [i.entry_id for i in ordered.memory][:3] == ["mem_09", "mem_05", "mem_00"]

    # Variations compose: the spans after one change are where the next one looks.
    without_01 = apply_variation(inputs, parse_variation("memory.drop=mem_01"))
    both = apply_variation(without_01, parse_variation("memory.truncate=3KB"))
    assert [i.entry_id for i in both.memory] == ["mem_00", "mem_02"]
    assert both.rendered.part_text("memory:mem_02") == inputs.rendered.part_text("memory:mem_02")

    with pytest.raises(InvalidVariation, match=r"no entry mem_99 in the working set \(entries: mem_00"):
        apply_variation(inputs, parse_variation("memory.drop=mem_99"))
    with pytest.raises(InvalidVariation, match="no entry has tier cold"):
        apply_variation(inputs, parse_variation("memory.tier=cold"))
    with pytest.raises(InvalidVariation, match="not a size"):
        parse_variation("memory.truncate=lots")
    with pytest.raises(InvalidVariation, match="memory has no field 'shuffle'"):
        parse_variation("memory.shuffle=1")


def test_truncating_the_working_set_below_8kb_clears_the_planted_failure(
    make_replayer: Callable[..., Replayer],
) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    report = replay_with_report(
        replayer,
        prepared,
        variations=[parse_variation("memory.truncate=7KB"), parse_variation("memory.drop=mem_00")],
    )
    assert report.row("memory.truncate").verdict == "outcome changed → memory.truncate is implicated"
    # Dropping one 1 KB entry of ten leaves ~9 KB: still over the limit, still failing; the verdict says
    # exactly what was tried, never that the working set is cleared in general.
    assert (
        report.row("memory.drop").verdict
        == "no change → memory.drop cleared for 1 value tried (memory.drop=mem_00; 1 run)"
    )


def test_the_request_variable_replaces_the_inbound_message(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    variation = parse_variation("request=Hi, I'm cus_0043. Please refund the duplicate charge.")
    varied = apply_variation(_inputs(make_replayer), variation)
    assert json.loads(varied.request.messages_text)[2]["content"].startswith("Hi, I'm cus_0043.")
    result = replayer.run(prepared, variation=variation)
    divergence = result.divergence
    assert divergence is not None and divergence.step == 1  # looks up the other customer: not recorded


def test_external_state_members_vary_inside_the_captured_value(
    make_replayer: Callable[..., Replayer],
) -> None:
    inputs = _inputs(make_replayer)
    varied = apply_variation(inputs, parse_variation("external_state.customer.balance.balance=10"))
    assert varied.externals["customer.balance"] == {**inputs.externals["customer.balance"], "balance": 10}
    with pytest.raises(InvalidVariation, match="no member 'amount'"):
        apply_variation(inputs, parse_variation("external_state.customer.balance.amount=10"))


def test_a_static_catalog_serves_library_use() -> None:
    catalog = StaticVersionCatalog({"system_prompt": {"v4.6": system_prompt("v4.6")}})
    assert parse_variation("system_prompt=v4.6", versions=catalog).value == system_prompt("v4.6")
    with pytest.raises(UnknownVersion, match=r"known: v4\.6\)"):
        parse_variation("system_prompt=v4.10", versions=catalog)


def test_cleared_states_how_many_runs(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    report = replay_with_report(
        replayer,
        replayer.prepare("dec_golden_identical"),
        variations=[parse_variation("sampling.top_p=0.5")],
        runs=3,
    )
    assert report.row("sampling.top_p").verdict.endswith("(sampling.top_p=0.5; 3 runs)")
