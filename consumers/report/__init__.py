"""``blackbox report``: a self-contained HTML page of the trends an SRE looks at first."""

from consumers.report.html import render_report

__all__ = ["render_report"]
