"""``pip install agent-blackbox`` is the SDK alone; ``agent-blackbox[server]`` adds the services and the CLI.

The slow tests build the base wheel (maturin compiles the native evidence core into it), install it
with its dependencies from the package index into a clean virtual environment (no system site
packages), and there record and deliver captures to a spool with the server packages absent; this
process, which has everything, reads and verifies them. With the compiled core removed from that
environment, the same capture seals to the same bytes through the pure-Python reference.
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
import zipfile
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
NATIVE = ROOT / "producers" / "native"
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
    (_, run), *_ = [stage for stage in _dockerfile_stages() if stage[0].startswith("python:")]
    assert any(line.startswith("RUN ") and '"${wheel}[server]"' in line for line in run)


# --- fast: the build backend and the image build the native core -----------------------------------


def _dockerfile_stages() -> list[tuple[str, list[str]]]:
    """(base image, instructions) per stage of deploy/Dockerfile; continuation lines joined."""
    text = (ROOT / "deploy" / "Dockerfile").read_text(encoding="utf-8")
    lines = [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]
    stages: list[tuple[str, list[str]]] = []
    for line in (raw.strip() for raw in lines if not raw.lstrip().startswith("#")):
        if line.startswith("FROM "):
            stages.append((line.split()[1], [line]))
        else:
            stages[-1][1].append(" ".join(line.split()))
    return stages


def test_the_build_backend_is_maturin_with_the_core_where_the_loader_imports_it() -> None:
    from packaging.requirements import Requirement

    system = PYPROJECT["build-system"]
    assert system["build-backend"] == "maturin"
    (requirement,) = (Requirement(r) for r in system["requires"])
    assert requirement.name == "maturin" and "1.16.0" in requirement.specifier
    maturin = PYPROJECT["tool"]["maturin"]
    # the loader imports producers.native._core; Cargo's [lib] must be named like the module's leaf
    assert maturin["module-name"] == "producers.native._core"
    cargo = tomllib.loads((ROOT / maturin["manifest-path"]).read_text(encoding="utf-8"))
    assert cargo["lib"]["name"] == "_core" and cargo["lib"]["crate-type"] == ["cdylib"]
    assert "abi3-py311" in cargo["dependencies"]["pyo3"]["features"]
    assert (ROOT / maturin["manifest-path"]).with_name("Cargo.lock").is_file()
    assert maturin["locked"] is True and maturin["profile"] == "release"
    # producers comes with the module name; the other top-level packages are listed
    assert maturin["python-source"] == "." and sorted(maturin["python-packages"]) == ["consumers", "schemas"]
    assert "tool" not in PYPROJECT or "setuptools" not in PYPROJECT["tool"]


def test_the_image_compiles_the_core_in_a_rust_stage_and_ships_no_compiler() -> None:
    from packaging.requirements import Requirement

    (build_image, build), (run_image, run) = _dockerfile_stages()
    assert build_image.startswith("rust:") and build[0].endswith(" AS build")
    assert run_image.startswith("python:3.11-slim")
    # one Debian release on both sides: the core is linked against the glibc of the image that runs it
    assert build_image.rsplit("-", 1)[1] == run_image.rsplit("-", 1)[1] == "bookworm"
    builds = " ".join(build)
    pinned = re.search(r"'maturin==([\d.]+)'", builds)
    assert pinned, "the build stage pins maturin"
    assert pinned[1] in Requirement(PYPROJECT["build-system"]["requires"][0]).specifier
    assert "maturin build" in builds and "cargo fetch --locked" in builds
    runs = " ".join(run)
    assert "COPY --from=build /wheels" in runs
    assert not re.search(r"apt-get|cargo|rustc|rustup|gcc|maturin", runs), "a compiler in the final image"
    assert 'n.status(); sys.exit(s != "native" and s)' in runs  # the build fails if the core does not load
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert {"producers/native/target", "producers/native/_core*.so"} <= set(ignored)
    assert {"!pyproject.toml", "!README.md", "!schemas", "!producers", "!consumers"} <= set(ignored)


def test_the_test_command_names_a_missing_cargo_in_one_line(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("bash", "dirname"):  # what test.sh runs before its cargo check; no cargo
        (bare / tool).symlink_to(shutil.which(tool) or pytest.fail(f"{tool} missing"))
    proc = subprocess.run(
        ["bash", str(ROOT / "deploy" / "local" / "test.sh")],
        # PYTHON=false: were the check gone, the pip step fails at once instead of installing anything
        env={"PATH": str(bare), "PYTHON": shutil.which("false") or "false"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1 and proc.stdout == "", proc.stdout
    assert proc.stderr == (
        "error: cargo is not on PATH: pip install builds the native core (Rust); "
        "install a Rust toolchain (rustup) and run again\n"
    )


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
    src: Path  # the copy the wheel was built from
    wheel: Path
    core: Path  # the compiled native core inside the environment


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
        shutil.copytree(ROOT / package, src / package, ignore=_not_sources)
    # Cargo's build tree beside the checkout's (gitignored), kept between runs: only the crate recompiles.
    env = _clean_env(CARGO_TARGET_DIR=str(NATIVE / "target" / "packaging-test"))
    wheels = root / "wheels"
    _checked(
        _run(
            [sys.executable, *PIP, "wheel", "-q", "--no-deps", "-w", wheels, src],
            cwd=root,
            env=env,
            timeout=900,
        )
    )
    (wheel,) = wheels.glob("agent_blackbox-*.whl")
    venv = root / "venv"
    _checked(_run([sys.executable, "-m", "venv", venv], cwd=root, env=env, timeout=120))
    python = venv / "bin" / "python"
    _checked(_run([python, *PIP, "install", "-q", wheel], cwd=root, env=env, timeout=600))
    workdir = root / "work"
    workdir.mkdir()
    (core,) = venv.glob("lib/python3*/site-packages/producers/native/_core*.so")
    return BaseVenv(
        python=python, blackbox=venv / "bin" / "blackbox", workdir=workdir, src=src, wheel=wheel, core=core
    )


def _not_sources(folder: str, names: list[str]) -> set[str]:
    """What a build must never pick up from the checkout: bytecode, Cargo's build tree, built cores."""
    ignored = {n for n in names if n == "__pycache__" or n.endswith(".pyc")}
    if Path(folder).resolve() == NATIVE:
        ignored |= {n for n in names if n == "target" or (n.startswith("_core") and n.endswith(".so"))}
    if Path(folder).resolve() == NATIVE.parent / "typescript":  # the Node SDK's installs and builds
        ignored |= {n for n in names if n in ("node_modules", "dist")}
    return ignored


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


# Rust sources and build files stay out of the wheel ([tool.maturin] exclude); the compiled core is in.
NOT_SHIPPED = re.compile(
    r"producers/native/(src/.*|Cargo\.(toml|lock)|build-dev\.sh)|producers/typescript/.*"
)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_wheel_ships_every_package_file_and_the_core_and_no_rust_source(base_venv: BaseVenv) -> None:
    with zipfile.ZipFile(base_venv.wheel) as wheel:
        shipped = {n for n in wheel.namelist() if not n.startswith("agent_blackbox-")}
    sources = {
        f.relative_to(base_venv.src).as_posix()
        for package in ("schemas", "producers", "consumers")
        for f in (base_venv.src / package).rglob("*")
        if f.is_file()
    }
    assert {s for s in sources if NOT_SHIPPED.fullmatch(s)} >= {
        "producers/native/Cargo.toml",
        "producers/native/Cargo.lock",
        "producers/native/src/lib.rs",
    }
    expected = {s for s in sources if not NOT_SHIPPED.fullmatch(s)} | {"producers/native/_core.abi3.so"}
    assert shipped == expected
    # the data files the code opens at run time, and the type information
    assert {
        "schemas/capture/v3.avsc",
        "schemas/examples/capture.unsealed.json",
        "consumers/index/ddl.sql",
        "consumers/retention/default_policy.toml",
        "schemas/py.typed",
        "producers/py.typed",
        "consumers/py.typed",
        "producers/native/_core.pyi",
    } <= shipped
    assert base_venv.wheel.name.endswith("-cp311-abi3-linux_x86_64.whl")  # one wheel for every 3.11+


# Seals the packaged example capture and a variant with the values canonical JSON is most particular
# about, with a fixed key (ed25519 signatures are deterministic); prints the path taken, the warnings,
# and the encoded captures.
SEAL_EXAMPLES = """
import base64, json, sys, warnings
from pathlib import Path
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import schemas
    from producers import native
    from producers.evidence import load_signer, seal
    from schemas.codec import encode_capture

    example = json.loads((Path(schemas.__file__).parent / "examples" / "capture.unsealed.json").read_text())
    variant = json.loads(json.dumps(example))
    variant["executionTrace"]["finalOutputText"] = "Grüße 💶 \u2028 \U0001f600 " + "x" * 30_000
    variant["executionTrace"]["toolCalls"][0]["output"] = {
        "ratio": 0.1 + 0.2, "big": 1e21, "small": 5e-324, "neg": -1.5e-7, "n": 2**53 - 1, "nested": [{"é": None}],
    }
    signer = load_signer(b64=sys.argv[1])
    encoded = [base64.b64encode(encode_capture(seal(c, signer))).decode() for c in (example, variant)]
    status = native.status()
print(json.dumps({
    "status": status,
    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
    "encoded": encoded,
}))
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_without_the_compiled_core_it_warns_naming_why_and_seals_the_same_bytes(base_venv: BaseVenv) -> None:
    seed = base64.b64encode(SEED).decode()
    natively = json.loads(_in_venv(base_venv, SEAL_EXAMPLES, seed))
    assert natively["status"] == "native" and natively["warnings"] == []

    hidden = base_venv.core.with_name("hidden-core.bin")
    base_venv.core.rename(hidden)  # the .so removed from the installed package
    try:
        reference = json.loads(_in_venv(base_venv, SEAL_EXAMPLES, seed))
        proc = _run(
            [base_venv.python, "-I", "-c", "from producers import native; native.core()"],
            cwd=base_venv.workdir,
            env=_clean_env(BLACKBOX_NATIVE="require"),
            timeout=120,
        )
    finally:
        hidden.rename(base_venv.core)

    why = "the native evidence core did not load: No module named 'producers.native._core'"
    assert reference["status"] == f"python ({why})"
    assert reference["warnings"] == [
        f"RuntimeWarning: blackbox: {why}; using the pure-Python reference (same bytes, slower)"
    ]
    assert reference["encoded"] == natively["encoded"]  # byte for byte, signatures included

    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == f"schemas.errors.NativeCoreUnavailable: BLACKBOX_NATIVE=require, but {why}"


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
