"""--runs N variance, model substitution, and what a metadata-only capture can still tell."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from consumers.replay import (
    CallableModelClient,
    ContentAbsent,
    ModelNotFound,
    Replayer,
    characterize,
    parse_variation,
    replay_with_report,
    report_json,
)
from schemas.errors import ModelClientError


def test_runs_at_temperature_show_a_distribution(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    hot = parse_variation("sampling.temperature=0.9")

    variance, results = characterize(replayer, prepared, runs=20, variation=hot)

    assert variance.runs == 20 == len(results)
    assert variance.distinct >= 2
    assert sum(b.count for b in variance.buckets) == 20
    assert variance.buckets == tuple(sorted(variance.buckets, key=lambda b: -b.count))
    assert 0 < variance.reproducing_runs < 20


def test_runs_at_temperature_zero_are_one_outcome(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    report = replay_with_report(replayer, replayer.prepare("dec_golden_identical"), runs=5)
    variance = report.as_captured.variance
    assert variance is not None and variance.distinct == 1 and variance.reproducing_runs == 5
    body = report_json(report)
    assert body["runs"][0]["variance"]["outcomes"][0]["count"] == 5


def test_unavailable_model_without_substitute_is_an_error(
    make_replayer: Callable[..., Replayer], golden_dir: Path, model_server: Any
) -> None:
    model_server.model.served.discard("acme-support")
    replayer = make_replayer()
    with pytest.raises(ModelNotFound, match="acme-support"):
        replay_with_report(replayer, replayer.prepare("dec_golden_identical"))


def test_unavailable_model_replays_against_the_substitute_with_a_caveat(
    make_replayer: Callable[..., Replayer], model_server: Any
) -> None:
    model_server.model.served.discard("acme-support")
    replayer = make_replayer(substitute_model="acme-support-next")
    report = replay_with_report(replayer, replayer.prepare("dec_golden_identical"))

    assert report.as_captured.result.model == "acme-support-next"
    assert report.as_captured.verdict == "reproduces the capture"
    assert any("substitute acme-support-next" in c and "not a faithful replay" in c for c in report.caveats)
    assert report_json(report)["runs"][0]["substituteCaveat"]


def test_model_endpoint_down_is_a_model_client_error(make_replayer: Callable[..., Replayer]) -> None:
    from consumers.replay import OpenAICompatibleClient

    client = OpenAICompatibleClient(endpoint="http://127.0.0.1:9/v1", timeout=2.0)
    try:
        result = make_replayer(client=client).replay("dec_golden_identical", raise_on_replay_failure=False)
    finally:
        client.close()
    assert isinstance(result.replay_failure, ModelClientError) and result.stop_reason == "error"


def test_callable_client_sees_the_request_an_http_server_would(
    make_replayer: Callable[..., Replayer],
) -> None:
    seen: list[dict[str, Any]] = []

    def model(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {"choices": [{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"}]}

    result = make_replayer(client=CallableModelClient(model)).replay(
        "dec_golden_identical", raise_on_replay_failure=False
    )
    assert seen[0]["model"] == "acme-support" and seen[0]["messages"][2]["role"] == "user"
    assert result.final_output == "ok" and result.stop_reason == "max_tokens"
    assert result.compared_to_original().first_divergent_step == 1  # type: ignore[union-attr]


def _compact(capture: dict[str, Any]) -> dict[str, Any]:
    """What retention leaves after 30 days: content gone, hashes and signature kept."""
    capture["agentConfiguration"]["systemPromptText"] = None
    capture["agentConfiguration"]["toolSchemaJson"] = None
    capture["renderedContext"]["text"] = None
    capture["input"]["requestPayload"] = None
    for entry in capture["memoryState"]["workingSetEntries"]:
        entry["renderedContent"] = None
    for call in capture["executionTrace"]["toolCalls"]:
        call["input"] = None
        call["output"] = None
    capture["executionTrace"]["finalOutputText"] = None
    for external in capture["externalState"]["observableExternals"]:
        external["capturedValue"] = None
    return capture


def test_metadata_only_capture_is_not_replayable_and_says_what_remains(
    make_replayer: Callable[..., Replayer], golden_dir: Path, model_server: Any
) -> None:
    capture = json.loads((golden_dir / "replay-identical.json").read_text(encoding="utf-8"))
    capture["decisionId"] = "dec_golden_identical"
    (golden_dir / "replay-identical.json").write_text(json.dumps(_compact(capture)), encoding="utf-8")

    with pytest.raises(ContentAbsent) as caught:
        make_replayer().replay("dec_golden_identical")  # still verifies: only content is gone
    error = caught.value
    assert "metadata-only" in str(error)
    assert "renderedContext.text" in error.missing
    assert "executionTrace.toolCalls[2].output" in error.missing
    assert any(
        "tool-call sequence (lookup_customer, get_balance, issue_refund)" in a for a in error.available
    )
    assert any("content hashes" in a for a in error.available)
    assert model_server.requests == []


def test_structured_only_capture_is_not_replayable(
    make_replayer: Callable[..., Replayer], golden_dir: Path
) -> None:
    capture = json.loads((golden_dir / "replay-identical.json").read_text(encoding="utf-8"))
    capture = _compact(capture)
    capture["captureLevel"] = (
        "structured-only"  # a manifest field: allow the unverified read to reach the check
    )
    (golden_dir / "replay-identical.json").write_text(json.dumps(capture), encoding="utf-8")
    with pytest.raises(ContentAbsent, match="structured-only"):
        make_replayer(allow_unverified=True).replay("dec_golden_identical")
