"""Replay test fixtures: the scripted model behind a real local HTTP server, a tool endpoint that
counts requests, the golden captures and key, and a real (chdb) index for the access log.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from replay_scripted import ScriptedModel
from replay_servers import GOLDEN, ModelServer, ToolServer

from consumers.access import AccessGate, Caller, IndexAccessLog
from consumers.index import ChdbIndex
from consumers.replay import EvidenceVerifier, FileCaptureSource, OpenAICompatibleClient, Replayer
from producers.evidence import Signer, TrustStore

KEY_SEED = Path(__file__).resolve().parents[2] / "producers" / "evidence" / "golden" / "test-key.seed"


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer(ScriptedModel(served=("acme-support", "acme-support-next")))
    yield server
    server.close()


@pytest.fixture
def tool_server() -> Iterator[ToolServer]:
    server = ToolServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def signer() -> Signer:
    return Signer.from_seed(base64.b64decode(KEY_SEED.read_text().strip()), name="did:blackbox:test")


@pytest.fixture(scope="session")
def trust(signer: Signer) -> TrustStore:
    store = TrustStore()
    store.add(signer.public_raw, not_before=datetime(2026, 1, 1, tzinfo=UTC), note="golden test key")
    return store


@pytest.fixture
def golden_dir(tmp_path: Path) -> Path:
    """A private copy of the goldens (tests may add captures beside them)."""
    target = tmp_path / "captures"
    target.mkdir()
    for path in GOLDEN.glob("*.json"):
        (target / path.name).write_bytes(path.read_bytes())
    return target


@pytest.fixture(scope="session")
def chdb_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replay-chdb")


@pytest.fixture(scope="module")
def chdb_engine(chdb_root: Path) -> Iterator[None]:
    """Keep the embedded engine up for the module (a restart per test costs ~0.3 s); closed after it,
    so other test modules may open their own chdb path (one path per process at a time)."""
    keeper = ChdbIndex(chdb_root, database="replay_keeper")
    yield
    keeper.close()


@pytest.fixture
def index(chdb_root: Path, chdb_engine: None) -> Iterator[ChdbIndex]:
    """A real chdb index, one fresh database per test."""
    handle = ChdbIndex(chdb_root, database=f"replay_{uuid.uuid4().hex[:12]}")
    handle.ensure_schema()
    yield handle
    handle.close()


@pytest.fixture
def gate(index: ChdbIndex) -> AccessGate:
    return AccessGate(log=IndexAccessLog(index))


@pytest.fixture
def operator() -> Caller:
    return Caller(identity="sre-oncall", scope="operator", reason="INC-4711 wrong refund")


@pytest.fixture
def make_replayer(
    golden_dir: Path, model_server: ModelServer, gate: AccessGate, operator: Caller, trust: TrustStore
) -> Iterator[Callable[..., Replayer]]:
    """Replayer factory: the real HTTP client at the scripted model, the goldens, the real gate."""
    clients: list[OpenAICompatibleClient] = []

    def make(**overrides: Any) -> Replayer:
        client = OpenAICompatibleClient(endpoint=model_server.endpoint)
        clients.append(client)
        options: dict[str, Any] = {
            "source": FileCaptureSource(golden_dir),
            "client": client,
            "gate": gate,
            "caller": operator,
            "verifier": EvidenceVerifier(trust),
        }
        options.update(overrides)
        return Replayer(**options)

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def access_log_rows(index: ChdbIndex) -> Callable[[], list[dict[str, Any]]]:
    def rows() -> list[dict[str, Any]]:
        return index.query(
            "SELECT caller, scope, decision_id, action, reason, outcome, detail FROM access_log ORDER BY at"
        )

    return rows
