"""The decision list reads through growing time windows (``list_decisions``); every page and count
must be what the unwindowed query gives: same rows, same order, same cursor, whatever the filter,
order, page depth, row versions (a later state row of one decision) or empty spans in time."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from consumers.app.runtime import open_runtime
from consumers.app.settings import load_service_settings
from consumers.index import listing
from consumers.index.engine import Index, insert_rows
from consumers.index.listing import DecisionFilter, list_decisions

START = datetime(2026, 3, 1, tzinfo=UTC)
AGENTS = ["agt_a", "agt_b", "agt_c"]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Index, list[dict[str, Any]]]]:
    rng = random.Random(5)
    rows: list[dict[str, Any]] = []
    for i in range(2400):
        # dense in the first 40 days, a 100-day gap, then sparse: windows of every width get tried
        day = rng.uniform(0, 40) if i < 2000 else rng.uniform(140, 200)
        rows.append(
            {
                "decision_id": f"dec_{i:06d}",
                "agent_id": rng.choice(AGENTS),
                "captured_at": START + timedelta(days=day),
                "outcome_status": "failure" if rng.random() < 0.05 else "success",
                "failed": False,
                "consequential": rng.random() < 0.1,
                "capture_level": "full",
                "prompt_version": rng.choice(["v1", "v2", "v3"]),
                "trust": "verified",
                "version": 0,
                "segment_key": "segments/s1",  # the TTL only drops rows without stored bytes
                "expires_at": START + timedelta(days=3650),
            }
        )
    # later state rows of some decisions (same captured_at, another value): FINAL must keep only them
    later = [{**r, "consequential": not r["consequential"], "version": 1} for r in rows[::7]]
    rows[-1]["decision_id"] = rows[-2]["decision_id"][:-1] + "x"  # ids need not follow time
    settings = load_service_settings(data_dir=tmp_path_factory.mktemp("windows"), tlog=False)
    with open_runtime(settings) as rt:
        for start in range(0, len(rows), 500):
            insert_rows(rt.index, "decisions", rows[start : start + 500])
        insert_rows(rt.index, "decisions", later)
        current = {r["decision_id"]: r for r in rows}
        current.update({r["decision_id"]: r for r in later})
        yield rt.index, list(current.values())


def expected(rows: list[dict[str, Any]], flt: DecisionFilter, order: str) -> list[str]:
    def keep(r: dict[str, Any]) -> bool:
        return (
            (not flt.agent or r["agent_id"] == flt.agent)
            and (not flt.outcome or r["outcome_status"] == flt.outcome)
            and (not flt.consequential or r["consequential"] == (flt.consequential == "yes"))
            and (not flt.prompt_version or r["prompt_version"] == flt.prompt_version)
            and (flt.since is None or r["captured_at"] >= flt.since)
            and (flt.until is None or r["captured_at"] < flt.until)
        )

    chosen = sorted((r for r in rows if keep(r)), key=lambda r: (r["captured_at"], r["decision_id"]))
    return [r["decision_id"] for r in (chosen[::-1] if order == "desc" else chosen)]


FILTERS = [
    DecisionFilter(),
    DecisionFilter(consequential="yes"),  # changed by the later rows
    DecisionFilter(outcome="failure", agent="agt_b"),  # rare: the windows run out
    DecisionFilter(prompt_version="v2", since=START + timedelta(days=20), until=START + timedelta(days=170)),
    DecisionFilter(agent="agt_zz"),  # nothing
]


@pytest.mark.parametrize("order", ["desc", "asc"])
@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: f.described())
def test_every_page_and_count_equal_the_unwindowed_query(
    fleet: tuple[Index, list[dict[str, Any]]],
    flt: DecisionFilter,
    order: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    index, rows = fleet
    monkeypatch.setattr(listing, "COUNT_CAP", 300)  # so both ways of settling the count are taken
    want = expected(rows, flt, order)
    got: list[str] = []
    after = ""
    while True:
        page = list_decisions(index, flt, order=order, after=after, limit=40)  # type: ignore[arg-type]
        assert page.total == min(len(want), 301)
        got += [r["decision_id"] for r in page.rows]
        if not page.next_cursor:
            break
        assert len(page.rows) == 40
        after = page.next_cursor
    assert got == want


def test_the_windows_grow_from_the_page_edge_and_end_unbounded(
    fleet: tuple[Index, list[dict[str, Any]]],
) -> None:
    index, _ = fleet
    edges = listing._windows(index, DecisionFilter(), order="desc", after="")
    assert edges[-1] is None and len(edges) >= 3
    widths = [edges[0] - edges[i] for i in range(1, len(edges) - 1)]  # type: ignore[operator]
    assert all(b > a for a, b in itertools.pairwise(widths))
    bounded = listing._windows(
        index, DecisionFilter(since=START + timedelta(days=197)), order="desc", after=""
    )
    assert bounded == [None]  # less than a day to search: no window


def test_a_cursor_past_the_last_match_gives_an_empty_page_and_the_whole_count(
    fleet: tuple[Index, list[dict[str, Any]]],
) -> None:
    index, rows = fleet
    flt = DecisionFilter(agent="agt_b")
    oldest = min(
        (r for r in rows if r["agent_id"] == "agt_b"), key=lambda r: (r["captured_at"], r["decision_id"])
    )
    after = f"{oldest['captured_at'].isoformat()}|{oldest['decision_id']}"
    page = list_decisions(index, flt, order="desc", after=after, limit=40)
    assert page.rows == [] and page.next_cursor == ""
    assert page.total == min(len(expected(rows, flt, "desc")), listing.COUNT_CAP + 1)
    assert list_decisions(index, DecisionFilter(agent="agt_zz")).total == 0
