"""The operator's loop to an agent's runtime: propose a version with a ``consequential_when`` rule, apply
it, ``blackbox pact export applied --out FILE``, and a Recorder given that file and the operator's public
key captures a matching decision in full under that version; an export never hands out an altered one."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from pact_world import blackbox

from producers.blobstore import LocalBlobStore
from producers.evidence import generate_keypair, load_signer
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import decode

sys.path.append(str(Path(__file__).resolve().parents[2] / "producers" / "pacts"))
from pact_runtime_testdata import BIG_REFUND, refund


def test_an_exported_applied_version_drives_the_recorder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"BLACKBOX_DATA_DIR": str(data)}
    blackbox(["keys", "generate", "--dir", str(data / "operator"), "--note", "pact operator"], env=env)
    (key,) = (data / "operator").glob("*.key")
    (public,) = (data / "operator").glob("*.pub")
    env["BLACKBOX_PACT_KEY"] = str(key)
    (tmp_path / "pacts.toml").write_text(BIG_REFUND, encoding="utf-8")
    out = blackbox(["pact", "propose", str(tmp_path / "pacts.toml"), "--reason", "keep big refunds"], env=env)
    version = out.stdout.split()[1]
    blackbox(["pact", "apply", version, "--force", "--reason", "first version"], env=env)

    exported = tmp_path / "srv" / "agt_billing_1.json"
    shown = blackbox(["pact", "export", "applied", "--out", str(exported)], env=env).stdout
    assert shown.strip() == f"exported {version} to {exported}"
    assert json.loads(exported.read_bytes())["payloadType"].startswith(
        "application/vnd.blackbox.pact-version"
    )
    assert blackbox(["pact", "export", version], env=env).stdout.strip() == exported.read_text().strip()

    runtime_key, runtime_public = generate_keypair(tmp_path / "runtime")
    blackbox(["keys", "trust", str(runtime_public), "--note", "billing runtime"], env=env)
    failures: list[CaptureFailure] = []
    rec = Recorder(
        agent_id="agt_billing_1",
        transport=SpoolTransport(data / "spool", linger_ms=1),
        signer=load_signer(path=runtime_key),
        policy=CapturePolicy(sample_one_in=0),
        on_error=failures.append,
        redact="off",
        pact=exported,
        pact_trust=public,
    )
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        did = refund(rec, 900.0)
        assert rec.flush(10)
    finally:
        rec.close(5)
    (capture,) = [decode(m.value).value for m in read_spool(data / "spool")]
    assert capture["decisionId"] == did and capture["captureLevel"] == "full"
    assert capture["pactVersion"] == version and "refund_over_500" in capture["consequential"]["reason"]
    assert failures == []

    # ingest accepts the capture/v4 capture (its signature covers pactVersion) and show returns it whole
    blackbox(["consume", "--drain", "--workers", "1"], env=env)
    stored = json.loads(blackbox(["show", did, "--json"], env=env).stdout)
    stored = stored.get("capture", stored)
    assert stored["pactVersion"] == version and stored["captureLevel"] == "full"

    # an altered stored version is refused by the export, never handed to a runtime
    store = LocalBlobStore(data / "blobs")
    key = f"pacts/versions/{version}.json"
    envelope = json.loads(store.get(key))
    record = json.loads(base64.b64decode(envelope["payload"]))
    record["document"] = record["document"].replace("> 500", "> 50000")
    envelope["payload"] = base64.b64encode(json.dumps(record).encode("utf-8")).decode("ascii")
    store.put(key, json.dumps(envelope).encode("utf-8"))
    refused = blackbox(["pact", "export", version], env=env, ok=False)
    assert refused.returncode != 0 and "the signature does not verify" in refused.stderr
