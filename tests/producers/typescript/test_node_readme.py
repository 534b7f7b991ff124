"""The README's Node snippet runs as shown (against the scripted provider server) and its capture
is ingested and verified by the Python side."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from node_sdk import PACKAGE, build_package, node
from typer.testing import CliRunner

from producers.evidence import TrustStore, load_signer

sys.path.append(str(Path(__file__).resolve().parents[2] / "integrations"))
from provider_server import ProviderServer, Reply

README = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
SEED_B64 = (Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed").read_text().strip()
# what the snippet leaves to the reader's program
PRELUDE = """const message = "I was charged twice, can you refund one?";
const note = "Customer cus_42 opened ticket T-17 about a double charge.";
const messages = [{ role: "system", content: note }, { role: "user", content: message }];
"""


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def test_the_node_snippet_runs_and_its_capture_verifies(server: ProviderServer, tmp_path: Path) -> None:
    build_package()
    (snippet,) = re.findall(r"```ts\n(.*?)```", README, flags=re.DOTALL)
    imports = "".join(line + "\n" for line in snippet.splitlines() if line.startswith("import "))
    body = "".join(line + "\n" for line in snippet.splitlines() if not line.startswith("import "))
    # the package imports itself by name (its "exports"), as an installed copy would be imported
    script = PACKAGE / "dist" / "readme-snippet.mjs"
    script.write_text(imports + PRELUDE + body, encoding="utf-8")
    server.script(Reply(text="Refunded."))
    work = tmp_path / "agent"
    work.mkdir()
    data = work / ".blackbox"
    data.mkdir()
    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    done = node(
        [str(script)],
        env={
            "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
            "OPENAI_API_KEY": "sk-readme-SECRET",
            "OPENAI_BASE_URL": server.openai_base_url,
        },
        cwd=work,
    )
    assert done.returncode == 0, done.stderr
    assert len(server.received) == 1

    from consumers.cli import app

    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    runner = CliRunner()
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    rows = json.loads(
        runner.invoke(app, ["query", "SELECT decision_id FROM decisions", "--json"], env=env).stdout
    )
    (decision_id,) = [row["decision_id"] for row in rows]
    verified = runner.invoke(app, ["verify", decision_id], env=env)
    assert verified.exit_code == 0, verified.output
    shown = json.loads(runner.invoke(app, ["show", decision_id, "--json"], env=env).stdout)["capture"]
    assert shown["fidelity"] == "wire" and shown["executionTrace"]["finalOutputText"] == "Refunded."
    assert shown["executionTrace"]["modelCalls"][0]["requestBody"].encode() == server.received[0].body
    assert "sk-readme-SECRET" not in json.dumps(shown)
