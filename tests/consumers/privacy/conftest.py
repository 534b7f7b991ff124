"""Fixtures of the personal-data tests: a signer its trust store knows, a data directory, a fresh chdb
database and the environment ``blackbox`` runs with."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.index import ChdbIndex, chdb_open_path
from producers.evidence import Signer, TrustStore
from producers.evidence.dsse import b64encode


@pytest.fixture
def signer() -> Signer:
    return Signer(Ed25519PrivateKey.generate(), name="did:test:privacy")


@pytest.fixture
def data(tmp_path: Path, signer: Signer) -> Path:
    data = tmp_path / "bb"
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    return data


@pytest.fixture(scope="session")
def own_chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("privacy-chdb")


@pytest.fixture
def index(own_chdb_dir: Path) -> Iterator[ChdbIndex]:
    """Database ``blackbox`` on the process's one chdb path (another module's, else ours), fresh."""
    index = ChdbIndex(Path(chdb_open_path() or own_chdb_dir), database="blackbox")
    index.command("DROP DATABASE IF EXISTS blackbox SYNC")
    index.ensure_schema()
    yield index
    index.command("DROP DATABASE IF EXISTS blackbox SYNC")
    index.close()  # the process's one chdb path must be free for the modules that run after this one


@pytest.fixture
def env(data: Path, signer: Signer, index: ChdbIndex) -> dict[str, str]:
    return {
        "BLACKBOX_DATA_DIR": str(data),
        "BLACKBOX_CHDB_PATH": str(chdb_open_path()),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "local",
        "BLACKBOX_SIGNING_KEY_B64": b64encode(signer.seed()),
    }
