"""The transports room as a whole: one registry that matches the setting, and both sides of every
backend importable without the consumer side or any server package (they ship in the SDK)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

from producers.settings import BlackboxSettings, load_settings
from producers.transports import BACKENDS, open_sender
from producers.transports.kafka.sender import KafkaTransport


def test_every_transport_setting_has_a_backend_and_every_backend_a_setting() -> None:
    assert set(BACKENDS) == set(get_args(BlackboxSettings.model_fields["transport"].annotation))


def test_every_transport_module_imports_without_consumers_or_server_packages() -> None:
    code = """
import importlib, json, pkgutil, sys
import producers.transports as room
names = [m.name for m in pkgutil.walk_packages(room.__path__, room.__name__ + ".")]
for name in names:
    importlib.import_module(name)
loaded = sorted({m.split(".")[0] for m in sys.modules})
print(json.dumps({"modules": names, "loaded": loaded}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert {
        f"producers.transports.{kind}.{side}" for kind in BACKENDS for side in ("sender", "source")
    } <= set(report["modules"])
    unwanted = {"consumers", "chdb", "minio", "typer", "rich", "pandas", "pyarrow", "httpx", "zstandard"}
    assert unwanted.isdisjoint(report["loaded"]), unwanted & set(report["loaded"])


def test_delivery_timeout_is_understood_by_every_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``blackbox capture --timeout`` passes one option, whatever the backend (no branch on the kind)."""
    seen: dict[str, Any] = {}

    def capture_init(self: KafkaTransport, **kwargs: Any) -> None:
        seen.update(kwargs)

    monkeypatch.setattr(KafkaTransport, "__init__", capture_init)
    for kind in BACKENDS:
        settings = load_settings(transport=kind, data_dir=tmp_path / kind)
        open_sender(settings, delivery_timeout=2.5)
    assert seen["message_timeout_ms"] == 2500
    assert seen["bootstrap"] == "127.0.0.1:9092" and seen["topic"] == "blackbox.captures.v1"
