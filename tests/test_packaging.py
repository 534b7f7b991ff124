"""``pip install agent-blackbox`` is the SDK alone; ``agent-blackbox[server]`` adds the services and the CLI.

The slow tests build the base wheel, install it with its dependencies from the package index into a
clean virtual environment (no system site packages), and there record and deliver captures to a
spool with the server packages absent; this process, which has everything, reads and verifies them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from producers.blobstore import LocalBlobStore
from producers.claimcheck import resolve_claim_check
from producers.evidence import TrustStore, load_signer, verify_capture
from producers.transports.spool.files import read_spool
from schemas.codec import decode

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
# Import names of what only the services need (directly or through chdb); none may reach the SDK.
SERVER_ONLY = (
    "chdb",
    "minio",
    "typer",
    "rich",
    "pandas",
    "pyarrow",
    "clickhouse_connect",
    "httpx",
    "zstandard",
    "cel",
    "rfc3161_client",
    "fastapi",
    "uvicorn",
    "jwt",
)
SEED = bytes(range(32))
PIP = ("-m", "pip", "--disable-pip-version-check", "--no-input")


def _distribution(requirement: str) -> str:
    return re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0].lower()


# --- fast: what the metadata and the docs promise ---------------------------------------------------


def test_the_base_dependencies_are_the_sdk_and_the_server_extra_has_the_rest() -> None:
    project = PYPROJECT["project"]
    base = {_distribution(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    assert base == {
        "confluent-kafka",
        "fastavro",
        "pydantic",
        "pydantic-settings",
        "cryptography",
        "rfc8785",
        "phonenumberslite",  # redaction at capture confirms phone numbers (producers.privacy)
    }
    assert extras["presidio"] == ["presidio-analyzer==2.2.366"]
    assert {_distribution(r) for r in extras["s3"]} == {"minio"}
    server = {_distribution(r) for r in extras["server"]}
    assert "agent-blackbox" in server  # server includes the s3 extra
    assert {
        "chdb",
        "clickhouse-connect",
        "zstandard",
        "typer",
        "rich",
        "httpx",
        "prometheus-client",
        "common-expression-language",
        "rfc3161-client",
    } <= server
    # the audit endpoint, pinned exactly (issue 13)
    assert {"fastapi==0.165.0", "uvicorn==0.54.0", "pyjwt==2.15.1"} <= set(extras["server"])
    assert project["scripts"]["blackbox"] == "consumers.entry:main"
    # One extra per capture adapter, pinned like the dev extra the adapter tests run with.
    assert extras["openai"] == ["openai==3.51.0", "httpx2==2.16.2"]
    assert extras["anthropic"] == ["anthropic==2.10.0", "httpx2==2.16.2"]
    assert extras["otel"] == ["opentelemetry-sdk==1.45.2", "opentelemetry-proto==1.45.2"]
    dev = set(extras["dev"])
    assert set(extras["openai"]) <= dev and set(extras["anthropic"]) <= dev and set(extras["otel"]) <= dev
    assert {
        "opentelemetry-exporter-otlp-proto-http==1.45.2",
        "opentelemetry-instrumentation-genai-openai==1.3b0",
        "opentelemetry-util-genai==1.3b0",
    } <= dev
    assert extras["langchain"] == ["langchain-core==1.8.3"]
    assert set(extras["langchain"]) <= dev
    assert {"langgraph==1.2.24", "langchain-openai==1.7.4"} <= dev


def test_the_readme_installs_the_server_extra_before_the_demo_and_tests_install_server_and_dev() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Two commands", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    first, second = section.strip().splitlines()[:2]
    assert first.startswith("pip install -e '.[server]' && blackbox demo")
    assert second.startswith("bash deploy/local/test.sh")
    assert "-e '.[server,dev]'" in (ROOT / "deploy" / "local" / "test.sh").read_text(encoding="utf-8")
    assert "'.[server]'" in (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")


def test_the_console_script_names_the_extra_when_a_server_package_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from consumers import entry

    monkeypatch.delitem(sys.modules, "consumers.cli", raising=False)
    monkeypatch.setitem(sys.modules, "typer", None)  # import of typer halted: as if not installed
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err == f"{entry.SERVER_EXTRA_HINT} (missing module: typer)\n"


def test_the_console_script_keeps_the_traceback_when_one_of_our_modules_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from consumers import entry

    monkeypatch.setitem(sys.modules, "consumers.cli", None)  # a broken package, not a missing extra
    with pytest.raises(ModuleNotFoundError):
        entry.main()


# --- slow: the base wheel in a clean virtual environment --------------------------------------------


@dataclass(frozen=True, slots=True)
class BaseVenv:
    python: Path
    blackbox: Path
    workdir: Path  # outside the checkout, so the wheel is imported, never the source tree


def _run(
    cmd: list[str | Path], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _checked(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _clean_env(**extra: str) -> dict[str, str]:
    """The caller's environment (pip's index settings included) minus Python paths and BLACKBOX_*."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BLACKBOX_", "PYTHON")) and k != "VIRTUAL_ENV"
    }
    return env | extra


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> BaseVenv:
    root = tmp_path_factory.mktemp("packaging")
    # Build from a copy: an in-tree build would leave build/ in the checkout, and a stale build/lib
    # would slip deleted modules into the wheel.
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for package in ("schemas", "producers", "consumers"):
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env = _clean_env()
    wheels = root / "wheels"
    _checked(
        _run(
            [sys.executable, *PIP, "wheel", "-q", "--no-deps", "-w", wheels, src],
            cwd=root,
            env=env,
            timeout=300,
        )
    )
    (wheel,) = wheels.glob("agent_blackbox-*.whl")
    venv = root / "venv"
    _checked(_run([sys.executable, "-m", "venv", venv], cwd=root, env=env, timeout=120))
    python = venv / "bin" / "python"
    _checked(_run([python, *PIP, "install", "-q", wheel], cwd=root, env=env, timeout=600))
    workdir = root / "work"
    workdir.mkdir()
    return BaseVenv(python=python, blackbox=venv / "bin" / "blackbox", workdir=workdir)


def _in_venv(venv: BaseVenv, script: str, *args: str, **env: str) -> str:
    # -I: no user site, no PYTHON* variables, and not the current directory on sys.path.
    cmd: list[str | Path] = [venv.python, "-I", "-c", textwrap.dedent(script), *args]
    proc = _run(cmd, cwd=venv.workdir, env=_clean_env(**env), timeout=120)
    return _checked(proc)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_base_install_has_no_server_package_and_every_sdk_module_imports(base_venv: BaseVenv) -> None:
    out = _in_venv(
        base_venv,
        """
        import importlib, importlib.util, json, pkgutil, sys
        import producers, schemas
        absent = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]
        sdk = [m.name for p in (schemas, producers) for m in pkgutil.walk_packages(p.__path__, p.__name__ + ".")]
        extra_named = {}
        for name in sdk:
            try:
                importlib.import_module(name)  # a module-level import of a server package fails here
            except ImportError as exc:
                if not name.startswith("producers.integrations."):
                    raise
                extra_named[name] = str(exc)  # a capture adapter without its extra: must say which
        print(json.dumps({"absent": absent, "sdk": sdk, "from": producers.__file__, "extras": extra_named}))
        """,
        *SERVER_ONLY,
    )
    report = json.loads(out)
    assert report["absent"] == list(SERVER_ONLY), "the base install pulled server packages"
    assert "site-packages" in report["from"]
    # capture adapters need their extra; without it, importing one names the extra to install
    assert {"producers.integrations.openai", "producers.integrations.anthropic"} <= set(report["extras"])
    assert "producers.integrations.langchain" in report["extras"]
    assert all("agent-blackbox[" in message for message in report["extras"].values()), report["extras"]
    # both sides of every transport are SDK modules: the ingest sources import no server package
    assert {
        "producers.recorder",
        "producers.transports.kafka.sender",
        "producers.transports.kafka.source",
        "producers.transports.spool.sender",
        "producers.transports.spool.source",
        "schemas.codec",
    } <= set(report["sdk"])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_base_install_records_seals_and_delivers_captures_to_the_spool(
    base_venv: BaseVenv, tmp_path: Path
) -> None:
    data_dir = tmp_path / "data"
    out = _in_venv(
        base_venv,
        """
        import json
        from producers import Recorder

        rec = Recorder.from_settings(agent_id="agt_support", runtime_id="rt_eu1_7")
        ids = []
        for size in (200, 300_000):  # the second goes by claim check to the local blob store
            with rec.decision(request={"message": "refund"}, consequential=True) as d:
                d.configure(model="acme-chat", model_version="2026-06-01", system_prompt="Be kind.\\n",
                            system_prompt_version="v4.7", tool_schema={"tools": []}, sampling={"temperature": 0.2})
                d.render_context(user_message="x" * size)
                d.add_tool_call(name="get_balance", input={"customer_id": "cus_42"}, output={"balance": 880})
                d.finish(output="Refunded $120.00.", stop_reason="end_turn")
            ids.append(d.decision_id)
        rec.close()
        print(json.dumps({"ids": ids, "delivered": rec.stats.delivered, "claim_checked": rec.stats.claim_checked}))
        """,
        BLACKBOX_DATA_DIR=str(data_dir),
        BLACKBOX_SIGNING_KEY_B64=base64.b64encode(SEED).decode(),
        BLACKBOX_MAX_MESSAGE_BYTES="100000",
    )
    report = json.loads(out)
    assert report["delivered"] == 2 and report["claim_checked"] == 1

    trust = TrustStore()
    trust.add(
        load_signer(b64=base64.b64encode(SEED).decode()).public_raw,
        not_before=datetime(2000, 1, 1, tzinfo=UTC),
    )
    blobs = LocalBlobStore(data_dir / "blobs")
    captures = []
    for record in read_spool(data_dir / "spool"):
        message = decode(record.value)
        body = resolve_claim_check(blobs, message.value) if message.kind == "claim_check" else record.value
        capture = decode(body).value
        verify_capture(capture, trust)
        captures.append(capture)
    assert [c["decisionId"] for c in captures] == report["ids"]
    assert all(c["executionTrace"]["toolCalls"][0]["output"] == {"balance": 880} for c in captures)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_cli_without_the_server_extra_says_what_to_install(base_venv: BaseVenv) -> None:
    proc = _run([base_venv.blackbox, "--help"], cwd=base_venv.workdir, env=_clean_env(), timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert re.fullmatch(
        r"the blackbox CLI needs the server extra: pip install 'agent-blackbox\[server\]' \(missing module: \w+\)",
        line,
    ), line


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_s3_blob_store_without_minio_names_the_extra(base_venv: BaseVenv) -> None:
    out = _in_venv(
        base_venv,
        """
        from producers.blobstore import S3BlobStore
        try:
            S3BlobStore("127.0.0.1:9000", "key", "secret", "bucket")
        except ImportError as exc:
            print(f"{exc} [{exc.name}]")
        """,
    )
    assert out.strip() == "the S3 blob store needs the s3 extra: pip install 'agent-blackbox[s3]' [minio]"


def _sdk_bundle(tmp_path: Path) -> tuple[Path, Path, str]:
    """An evidence bundle made here with the SDK's own functions: a sealed capture, its trust record,
    and an inclusion proof in a two-leaf log under a signed checkpoint. Returns (bundle, trust, vkey)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from producers.evidence import seal
    from producers.evidence.bundle import build_bundle
    from producers.evidence.merkle import leaf_hash, merkle_root
    from producers.evidence.tlog import capture_leaf, format_checkpoint, sign_note, vkey

    example = json.loads(
        (ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text(encoding="utf-8")
    )
    signer = load_signer(b64=base64.b64encode(SEED).decode())
    capture = seal(example, signer)
    trust = TrustStore()
    record = trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC), note="runtime key")
    trust_path = tmp_path / "trust.toml"
    trust.save(trust_path)

    log = Ed25519PrivateKey.generate()
    origin = "example.org/log"
    leaves = [capture_leaf(capture), b'{"another": "leaf"}']
    note = sign_note(format_checkpoint(origin, 2, merkle_root(leaves)), name=origin, private_key=log)
    proof = {
        "leafIndex": 0,
        "treeSize": 2,
        "hashes": [base64.b64encode(leaf_hash(leaves[1])).decode()],
        "checkpoint": note,
        "leaf": base64.b64encode(leaves[0]).decode(),
    }
    key = vkey(origin, log.public_key().public_bytes_raw())
    bundle = build_bundle(
        capture, trusted=record, transparency={"logKey": key, "proof": proof}, exported_at=datetime.now(UTC)
    )
    bundle_path = tmp_path / "bundle.json"
    bundle_path.write_text(json.dumps(bundle), encoding="utf-8")
    return bundle_path, trust_path, key


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_evidence_bundle_verifies_offline_with_the_base_sdk_only(
    base_venv: BaseVenv, tmp_path: Path
) -> None:
    bundle, trust, key = _sdk_bundle(base_venv.workdir)
    cmd: list[str | Path] = [
        base_venv.python,
        "-I",
        "-m",
        "producers.evidence.bundle",
        bundle,
        "--trust",
        trust,
    ]
    proc = _run([*cmd, "--log-key", key], cwd=base_venv.workdir, env=_clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("verified: dec_01J9Z8K2V6XAMPLE key=sha256:")
    assert "in log example.org/log at leaf 0 of 2" in proc.stdout

    # one changed byte in the capture is refused, naming the part
    document = json.loads(bundle.read_text(encoding="utf-8"))
    document["capture"]["executionTrace"]["finalOutputText"] += "!"
    tampered = base_venv.workdir / "tampered.json"
    tampered.write_text(json.dumps(document), encoding="utf-8")
    proc = _run(
        [
            base_venv.python,
            "-I",
            "-m",
            "producers.evidence.bundle",
            tampered,
            "--trust",
            trust,
            "--log-key",
            key,
        ],
        cwd=base_venv.workdir,
        env=_clean_env(),
        timeout=120,
    )
    assert proc.returncode == 1 and "part=capture.executionTrace.finalOutputText" in proc.stdout, proc.stdout
