"""``--log-format json``: one JSON object per line on stderr, for log shippers.

Each line has ``ts`` (UTC, ISO-8601 with milliseconds), ``level``, ``logger`` and ``message``, then every
structured field the call passed with ``extra={...}``, and ``exception`` when there is one. The text
format (the default) leaves logging as it always was: warnings and errors, as plain messages.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

__all__ = ["LOG_FORMATS", "JsonFormatter", "LogFormat", "configure_logging"]

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")

# Attributes every LogRecord has; anything else on a record came from ``extra`` and is a field.
_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """A log record as one line of JSON (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRS and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def configure_logging(fmt: LogFormat) -> None:
    """``json``: INFO and above as JSON lines on stderr (a root handler). ``text``: logging is left alone."""
    if fmt == "text":
        return
    root = logging.getLogger()
    if not any(isinstance(h.formatter, JsonFormatter) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.captureWarnings(True)  # a library's warnings.warn becomes a JSON line too, not bare text
