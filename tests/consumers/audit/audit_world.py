"""A data directory with ingested captures, tokens, and the audit endpoint served on a free loopback
port from a thread (real HTTP, real uvicorn), with a clock the tests move."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner, Result

from consumers.app.runtime import Runtime, open_runtime
from consumers.app.settings import load_service_settings
from consumers.audit import create_app
from consumers.cli import app as cli
from consumers.web.server import WebServer
from producers.evidence import Signer, TrustStore, seal
from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text(encoding="utf-8"))
T0 = datetime(2026, 7, 20, 9, 0, tzinfo=UTC)

# decision id -> (agent, originUserId)
DECISIONS = {
    "dec_a_alice_1": ("agt_support_1", "usr_alice"),
    "dec_a_alice_2": ("agt_support_1", "usr_alice"),
    "dec_a_bob_1": ("agt_support_1", "usr_bob"),
    "dec_a_billing_1": ("agt_billing_1", "usr_carol"),
}


def capture(decision_id: str, agent: str, user: str, i: int) -> dict[str, Any]:
    c = copy.deepcopy(EXAMPLE)
    c["decisionId"] = decision_id
    c["agentId"] = agent
    c["input"]["originUserId"] = user
    c["capturedAt"] = (T0 + timedelta(minutes=i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    c["executionTrace"]["finalOutputText"] = f"Refund #{i} for {user}."
    return c


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@dataclass
class World:
    data: Path
    env: dict[str, str]
    signer: Signer
    captures: dict[str, dict[str, Any]]
    clock: Clock = field(default_factory=lambda: Clock(T0 + timedelta(days=1)))

    def cli(self, *args: str, **env: str) -> Result:
        return CliRunner().invoke(cli, list(args), env={**self.env, **env})

    def token(self, caller: str, scope: str, *extra: str) -> str:
        result = self.cli("access", "token", "create", "--caller", caller, "--scope", scope, *extra)
        assert result.exit_code == 0, result.output
        return result.stdout.strip().splitlines()[0]

    def runtime(self) -> Runtime:
        return open_runtime(load_service_settings(data_dir=self.data), existing_index=True, clock=self.clock)

    @contextmanager
    def serve(self, **settings: Any) -> Iterator[httpx.Client]:
        rt = open_runtime(
            load_service_settings(data_dir=self.data, **settings), existing_index=True, clock=self.clock
        )
        try:
            with (
                WebServer(create_app(rt, clock=self.clock)) as server,
                httpx.Client(base_url=server.url, timeout=30) as client,
            ):
                yield client
        finally:
            rt.close()

    def access_rows(self) -> list[dict[str, Any]]:
        with self.runtime() as rt:
            return rt.index.query("SELECT * FROM access_log ORDER BY seq")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_world(root: Path) -> World:
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:audit")
    data = root / "bb"
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC), note="runtime key")
    trust.save(data / "trust.toml")
    captures = {
        d: seal(capture(d, agent, user, i), signer) for i, (d, (agent, user)) in enumerate(DECISIONS.items())
    }
    writer = SpoolWriter(data / "spool")
    for c in captures.values():
        writer.append(c["agentId"].encode(), encode_capture(c))
    writer.publish()
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    world = World(data, env, signer, captures)
    consumed = world.cli("consume", "--drain", "--max-wait", "0.1")
    assert consumed.exit_code == 0 and f"indexed={len(captures)}" in consumed.output, consumed.output
    return world
