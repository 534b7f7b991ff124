"""``blackbox finding``: record what an investigation concluded, as a rule and a pinned suite.

- ``finding add NAME --rule CEL [--from-replay RUN_ID] [--decision ID]... [--description TEXT]``
  evaluates the rule (true on a decision that shows the problem; the ``decision`` view of
  :mod:`producers.pacts.view`) on the decisions named and those the replay run replayed, and pins
  the ones it matches; the others are listed with the reason;
- ``finding list`` the findings and the size of each suite; ``finding show NAME`` one finding and its
  pinned decisions (``--json`` on both);
- ``trends finding:NAME`` (in :mod:`consumers.commands.index`) its incidence per day.

Every capture the rule reads is a logged access (action ``evaluate``).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated

import typer

from consumers import terminal
from consumers.app.runtime import open_runtime
from consumers.commands.index import JsonOpt, print_rows
from consumers.findings import FindingError, add_finding, get_finding, list_findings, pinned_decisions
from consumers.privacy.ids import index_ids

__all__ = ["register"]


def add(
    name: Annotated[str, typer.Argument(help="The finding's name (letters, digits, _ . : -).")],
    rule: Annotated[str, typer.Option("--rule", help="CEL over `decision`, true when it shows the problem.")],
    from_replay: Annotated[
        str | None, typer.Option("--from-replay", help="Candidates: the decisions of this replay run.")
    ] = None,
    decision: Annotated[
        list[str] | None, typer.Option("--decision", help="A candidate decision id (repeatable).")
    ] = None,
    description: Annotated[str, typer.Option("--description", help="What was concluded, in words.")] = "",
) -> None:
    """Record a finding: pin the candidate decisions its rule matches."""
    with open_runtime(existing_index=True) as rt:
        record = add_finding(
            rt.index,
            name=name,
            rule=rule,
            description=description,
            decisions=decision or (),
            from_replay=from_replay,
            blobs=rt.blob_store,
            gate=rt.gate,
            caller=rt.caller(f"finding add {name}"),
            now=datetime.now(UTC),
            ids=index_ids(rt.settings),
        )
    pinned = ", ".join(terminal.clean(d) for d in record.pinned)
    terminal.echo(f"finding {terminal.clean(record.name)}: pinned {len(record.pinned)} decision(s): {pinned}")
    for did, why in record.skipped:
        terminal.echo(f"  not pinned {terminal.clean(did)}: {terminal.clean(why)}")


def list_(as_json: JsonOpt = False) -> None:
    """The findings, oldest first, with the size of each pinned suite."""
    with open_runtime(existing_index=True) as rt:
        rows = list_findings(rt.index)
    if not as_json:  # the whole rule is in `finding show`; a table row keeps its start
        rows = [{**r, "rule": r["rule"] if len(r["rule"]) <= 60 else r["rule"][:59] + "…"} for r in rows]
    print_rows(rows, as_json=as_json, title="findings")


def show(
    name: Annotated[str, typer.Argument(help="The finding's name.")],
    as_json: JsonOpt = False,
) -> None:
    """One finding: its rule, where it came from, and its pinned decisions (failed = failed_any now)."""
    with open_runtime(existing_index=True) as rt:
        finding = get_finding(rt.index, name)
        if finding is None:
            raise FindingError(f"no finding {name!r} (see `blackbox finding list`)")
        pinned = pinned_decisions(rt.index, name)
    if as_json:
        terminal.echo_json({**finding, "decisions": pinned}, default=_iso)
        return
    c = terminal.clean
    terminal.echo(
        f"finding {c(finding['name'])}  (created {c(_iso(finding['created_at']))} by {c(finding['created_by'])})"
    )
    if finding["description"]:
        terminal.echo(f"  {c(finding['description'])}")
    if finding["from_replay"]:
        terminal.echo(f"  from replay run {c(finding['from_replay'])}")
    terminal.echo(f"  rule: {c(finding['rule'])}")
    print_rows(pinned, as_json=False, title=f"{len(pinned)} pinned decision(s)")


def _iso(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime | date) else str(value)


def register(app: typer.Typer) -> None:
    finding_app = typer.Typer(
        help="Findings: a rule and the pinned decisions that showed it.", no_args_is_help=True
    )
    finding_app.command("add")(add)
    finding_app.command("list")(list_)
    finding_app.command("show")(show)
    app.add_typer(finding_app, name="finding")
