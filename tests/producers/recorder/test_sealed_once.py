"""A tool schema given per decision is sealed once per content (producers.config.SealedSnapshots and
the set-aside in producers.evidence.seal): equal content is a lookup, content mutated in place is
snapshotted and hashed again, and the sealed, signed bytes are the same as the reference path's
(the pure-Python core, nothing cached) on the same decisions."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recorder_testdata import (
    CONFIG,
    KeptTransport,
    StepClock,
    make_content,
    make_tool_schema,
    new_signer,
    record,
)

from producers import config as config_module
from producers import decision as decision_module
from producers import native
from producers import unrecordable as check
from producers.config import SealedSnapshots
from producers.evidence import seal
from producers.evidence.canonical import json_hash
from producers.evidence.parts import pinned_hash
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from schemas import codec
from schemas.errors import ContractError

PATH = "agentConfiguration.toolSchemaJson"


def _strict(value: Any) -> Any:
    """The value with every node's exact type beside it: equal only when types, order and values are."""
    if isinstance(value, dict):
        return ("dict", [(_strict(k), _strict(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_strict(v) for v in value])
    return (type(value).__name__, repr(value))


def _fresh(value: Any) -> tuple[Any, list[str]]:
    problems: list[str] = []
    return check.snapshot(value, path=PATH, problems=problems), problems


def test_equal_content_is_one_snapshot_with_its_hash_and_text_pinned() -> None:
    cache = SealedSnapshots()
    first, second = make_tool_schema(20), make_tool_schema(20)  # equal, not the same object
    problems: list[str] = []
    kept = cache.snapshot(first, path=PATH, problems=problems)
    assert cache.snapshot(second, path=PATH, problems=problems) is kept  # built afresh
    assert cache.snapshot(first, path=PATH, problems=problems) is kept  # the same constant again
    # parsed from a request body: its keys are not interned, so another entry; the next parse hits it
    text = json.dumps(first)
    parsed = cache.snapshot(json.loads(text), path=PATH, problems=problems)
    assert cache.snapshot(json.loads(text), path=PATH, problems=problems) is parsed
    assert _strict(parsed) == _strict(kept)
    assert kept is not first and kept is not second and problems == []
    assert _strict(kept) == _strict(_fresh(first)[0])
    assert pinned_hash(kept, "json") == json_hash(first)
    assert codec._json_text(kept) == codec._dumps(first)


# One in-place change each, deep or shallow, including the ones equality would not see
# (True == 1 == 1.0, 0.0 == -0.0) and a key order that only the JSON text shows.
MUTATIONS = {
    "a description": lambda s: s["tools"][7]["function"].__setitem__("description", "changed"),
    "a bool to an int": lambda s: s["tools"][0]["function"]["parameters"].__setitem__(
        "additionalProperties", 0
    ),
    "an int to a float": lambda s: s["tools"][3]["function"]["parameters"]["properties"][
        "amount"
    ].__setitem__("minimum", 0.0),
    "0.0 to -0.0": lambda s: s["tools"][3]["function"]["parameters"]["properties"]["amount"].__setitem__(
        "minimum", -0.0
    ),
    "a tool appended": lambda s: s["tools"].append(copy.deepcopy(s["tools"][0])),
    "a tool removed": lambda s: s["tools"].pop(),
    "key order": lambda s: s["tools"][2]["function"].update({"name": s["tools"][2]["function"].pop("name")}),
    "a list to a tuple": lambda s: s["tools"][1]["function"]["parameters"].__setitem__(
        "required", ("customer_id",)
    ),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_schema_mutated_in_place_is_snapshotted_and_hashed_again(mutation: str) -> None:
    cache = SealedSnapshots()
    schema = make_tool_schema(20)
    before = cache.snapshot(schema, path=PATH, problems=[])
    before_hash = pinned_hash(before, "json")
    MUTATIONS[mutation](schema)  # the runtime's own object, changed between two decisions
    after = cache.snapshot(schema, path=PATH, problems=[])
    assert after is not before
    assert _strict(after) == _strict(_fresh(schema)[0])
    assert pinned_hash(after, "json") == json_hash(_fresh(schema)[0])
    assert codec._json_text(after) == codec._dumps(_fresh(schema)[0])
    assert pinned_hash(before, "json") == before_hash  # the earlier snapshot was not touched
    # equal RFC 8785 bytes (0, 0.0 and -0.0 are all "0"; keys sorted): told apart by the text above
    if mutation not in ("key order", "a list to a tuple", "an int to a float", "0.0 to -0.0"):
        assert pinned_hash(after, "json") != before_hash


class Schema(dict[str, Any]):
    pass


@pytest.mark.parametrize(
    ("label", "make", "problem"),
    [
        ("a set", lambda s: s["tools"][0].__setitem__("tags", {"a"}), "set"),
        ("a NaN", lambda s: s["tools"][0].__setitem__("weight", math.nan), None),
        ("a lone surrogate", lambda s: s["tools"][0].__setitem__("name", "\ud800"), None),
        ("an int beyond 2**53", lambda s: s["tools"][0].__setitem__("n", 2**60), None),
        ("a dict subclass", lambda s: s["tools"].__setitem__(0, Schema(s["tools"][0])), None),
    ],
)
def test_what_the_worker_must_name_is_never_kept(label: str, make: Any, problem: str | None) -> None:
    cache = SealedSnapshots()
    schema = make_tool_schema(20)
    make(schema)
    for _ in range(2):  # every decision names it again, and gets a snapshot of its own
        problems: list[str] = []
        got = cache.snapshot(schema, path=PATH, problems=problems)
        assert problems == _fresh(schema)[1]
        assert problem is None or any(problem in p for p in problems), (label, problems)
    assert cache._entries == {}
    assert cache.snapshot(schema, path=PATH, problems=[]) is not got


def test_the_cache_is_bounded_and_small_or_scalar_values_pass_through() -> None:
    cache = SealedSnapshots(max_entries=3)
    for n in range(1, 7):
        cache.snapshot(make_tool_schema(n), path=PATH, problems=[])
    assert len(cache._entries) == 3
    small: dict[str, Any] = {"tools": []}
    assert cache.snapshot(small, path=PATH, problems=[]) is not cache.snapshot(small, path=PATH, problems=[])
    assert cache.snapshot("text", path=PATH, problems=[]) == "text"
    assert len(cache._entries) == 3


def test_a_pinned_schema_with_a_disagreeing_supplied_hash_is_still_refused() -> None:
    from producers.evidence.parts import pin_part

    schema = make_tool_schema(20)
    pin_part(schema, "json")
    capture = record_one_capture()
    capture["agentConfiguration"]["toolSchemaJson"] = schema
    capture["agentConfiguration"]["toolSchemaHash"] = "sha256:" + "0" * 64
    with pytest.raises(ContractError) as raised:
        seal(capture, new_signer(), copy=False, pinned=True)
    assert raised.value.path == "agentConfiguration.toolSchemaHash"
    assert capture["agentConfiguration"]["toolSchemaJson"] is schema


def record_one_capture() -> dict[str, Any]:
    rec = Recorder(agent_id="agt_once", transport=KeptTransport(), signer=new_signer(), clock=StepClock())
    rec._submit_decision = lambda builder: None  # type: ignore[method-assign]  # kept here
    d = record(rec, make_content(3_000), config=CONFIG)
    rec.close()
    return d.to_capture()


# --- the sealed, signed bytes: cached and native vs the reference path --------------------------------
_SIGNER = new_signer()


@pytest.fixture
def reference(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A function switching to the reference path: the pure-Python core, nothing cached. (Each
    decision's measured latency is made 0 ms, so a slower path does not change what is recorded.)"""
    monkeypatch.setattr(
        decision_module, "time", type("Still", (), {"perf_counter": staticmethod(lambda: 0.0)})
    )

    def use() -> None:
        monkeypatch.setattr(config_module, "sealed_snapshots", SealedSnapshots(min_bytes=1 << 40))
        monkeypatch.setenv("BLACKBOX_NATIVE", "off")
        native.reset()

    yield use
    monkeypatch.undo()
    native.reset()


def _sent(schemas: list[Any], *, seeds: int = 1) -> list[bytes]:
    """Decisions configured per decision with ``schemas[i]`` as the runtime holds it at decision
    ``i`` (``schemas`` may repeat one object, mutated between decisions by the caller's ``steps``)."""
    transport = KeptTransport()
    rec = Recorder(
        agent_id="agt_once",
        transport=transport,
        signer=_SIGNER,
        runtime_id="rt_once",
        clock=StepClock(),
        policy=CapturePolicy(sample_one_in=0),
    )
    for i, schema in enumerate(schemas):
        record(
            rec,
            make_content(2_000 + 2_500 * (i % 4), seed=i % seeds),
            consequential=True,
            decision_id=f"01J00000000000000000ONCE{i:02d}",
            config={**CONFIG, "tool_schema": schema() if callable(schema) else schema},
        )
    assert rec.flush(30)
    rec.close()
    assert rec.stats.failed == 0
    return list(transport.sent)


def _mutating_steps() -> list[Any]:
    """Eight decisions over one runtime-held schema: the same twice, then changed in place."""
    schema = make_tool_schema(20)
    steps: list[Any] = []
    for mutation in (None, None, "a description", None, "0.0 to -0.0", "a bool to an int", "key order", None):

        def step(mutation: str | None = mutation) -> Any:
            if mutation is not None:
                MUTATIONS[mutation](schema)
            return schema

        steps.append(step)
    return steps


def test_the_sealed_bytes_equal_the_reference_path_with_a_schema_mutated_between_decisions(
    reference: Any,
) -> None:
    cached = _sent(_mutating_steps())
    assert config_module.sealed_snapshots._entries  # the cache was used
    reference()
    expected = _sent(_mutating_steps())
    assert len(cached) == 8 and cached == expected
    decoded = [codec.decode(data).value["agentConfiguration"] for data in cached]
    hashes = [c["toolSchemaHash"] for c in decoded]
    texts = [codec._dumps(c["toolSchemaJson"]) for c in decoded]
    assert hashes[0] == hashes[1] != hashes[2] == hashes[3] and hashes[4] != hashes[5]
    assert texts[3] != texts[4] and texts[5] != texts[6] == texts[7]  # -0.0, key order: same hash


# Tool schemas with every edge marshal must tell apart and JSON must carry exactly
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1, 1.0, True, 5e-324, "x" * 600])
    | st.text(st.characters(codec="utf-8"), max_size=40)
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=40,
)
_leaf_paths = st.lists(st.integers(0, 10), min_size=1, max_size=6)


def _mutate(value: Any, path: list[int], new: Any) -> bool:
    """Replace one leaf (or append to a list) along ``path``, in place; False if nothing to change."""
    node = value
    for step in path:
        children = list(node.keys()) if isinstance(node, dict) else node if isinstance(node, list) else []
        if not children:
            break
        key = list(node.keys())[step % len(node)] if isinstance(node, dict) else step % len(node)
        if not isinstance(node[key], dict | list):
            node[key] = new
            return True
        node = node[key]
    if isinstance(node, list):
        node.append(new)
        return True
    if isinstance(node, dict):
        node["added"] = new
        return True
    return False


@settings(max_examples=60, deadline=None)
@given(extra=_json, path=_leaf_paths, new=_scalars)
def test_any_schema_mutated_anywhere_seals_as_the_reference(extra: Any, path: list[int], new: Any) -> None:
    schema = make_tool_schema(3)
    schema["extra"] = extra
    first_text = codec._dumps(schema)
    cache = SealedSnapshots(min_bytes=0)
    kept = cache.snapshot(schema, path=PATH, problems=[])
    assert cache.snapshot(schema, path=PATH, problems=[]) is kept
    changed = _mutate(schema["extra"] if isinstance(extra, dict | list) else schema, path, new)
    again = cache.snapshot(schema, path=PATH, problems=[])
    fresh = _fresh(schema)[0]
    assert _strict(again) == _strict(fresh)
    assert pinned_hash(again, "json") == json_hash(fresh)
    assert codec._json_text(again) == codec._dumps(fresh)
    if changed and codec._dumps(schema) != first_text:
        assert again is not kept
    # sealing with the pin set aside fills what hashing the schema again fills, to the signature
    capture = _base_capture()
    capture["agentConfiguration"]["toolSchemaJson"] = again
    expected = seal(copy.deepcopy(capture), _SIGNER, copy=False, pinned=False)
    assert _strict(seal(capture, _SIGNER, copy=False, pinned=True)) == _strict(expected)
    assert capture["agentConfiguration"]["toolSchemaJson"] is again


_BASE: list[dict[str, Any]] = []


def _base_capture() -> dict[str, Any]:
    if not _BASE:
        _BASE.append(record_one_capture())
    return copy.deepcopy(_BASE[0])
