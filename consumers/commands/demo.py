"""``blackbox demo`` (the whole story on one machine) and ``blackbox report`` (the HTML page)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer

from consumers.app.runtime import open_runtime


def demo_command(
    directory: Annotated[
        Path,
        typer.Option("--dir", help="Where the demo keeps its data (replaced if an earlier demo made it)."),
    ] = Path("blackbox-demo"),
    decisions: Annotated[int, typer.Option("--decisions", min=100, help="Decisions to simulate.")] = 3000,
    days: Annotated[int, typer.Option("--days", min=3, help="Simulated days.")] = 14,
) -> None:
    """Capture → trends → replay → vary → bisect, on embedded defaults unless services are configured."""
    from consumers.demo.story import run_demo

    run_demo(data_dir=directory.resolve(), decisions=decisions, days=days)


def report_command(
    out: Annotated[Path, typer.Option("--out", help="Where to write the HTML page.")] = Path("report.html"),
    since: Annotated[
        datetime | None, typer.Option("--since", help="Start of the window (default: 30 days ago).")
    ] = None,
    until: Annotated[
        datetime | None, typer.Option("--until", help="End of the window (default: now).")
    ] = None,
) -> None:
    """Write a self-contained HTML report: failure rates, latency, tool errors, volume, replays."""
    from consumers.report import render_report
    from consumers.report.data import report_data

    now = datetime.now(UTC)
    until_ = (until or now + timedelta(days=1)).replace(tzinfo=(until or now).tzinfo or UTC)
    since_ = (since or now - timedelta(days=30)).replace(tzinfo=(since or now).tzinfo or UTC)
    with open_runtime(existing_index=True) as rt:
        data = report_data(rt.index, since=since_, until=until_)
    window = f"{since_.date()} to {until_.date()}"
    out.write_text(render_report(**data, generated_at=now, window=window), encoding="utf-8")
    typer.echo(f"wrote {out}")


def register(app: typer.Typer) -> None:
    app.command("demo")(demo_command)
    app.command("report")(report_command)
