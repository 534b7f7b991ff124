"""The audit endpoint's SQL: the replay runs of one decision (``replay_runs``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.index import Index


def replay_runs(index: Index, decision_id: str) -> list[dict[str, Any]]:
    """Every replay run of ``decision_id``, newest first (at most 1000), times as RFC 3339 text."""
    rows = index.query(
        "SELECT run_id, at, kind, variable, variation_value, attempt, model_used, substitute_model, "
        "final_output_equal, tool_sequence_equal, first_divergent_step, stop_reason, verdict, "
        "outcome_changed, detail FROM replay_runs FINAL WHERE decision_id = {d:String} "
        "ORDER BY at DESC, run_id, attempt LIMIT 1000",
        {"d": decision_id},
    )
    return [
        {k: (v.isoformat().replace("+00:00", "Z") if hasattr(v, "isoformat") else v) for k, v in r.items()}
        for r in rows
    ]
