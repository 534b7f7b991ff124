"""The built wheel, installed into clean virtual environments without a Rust toolchain.

The distributions are built once per session (``built`` in conftest.py: an abi3 manylinux2014 wheel
and an sdist, the wheel built from the sdist). The SDK alone records and delivers captures to a spool
with the server packages absent, and this process, which has everything, reads and verifies them;
with the compiled core removed, the same capture seals to the same bytes through the pure-Python
reference. With the server extra, ``blackbox demo`` runs from the wheel and its captures verify.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
import sys
import tarfile
import textwrap
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from distributions import MANYLINUX, MATURIN_BUILD, PYPROJECT, Built, Venv, checked, clean_env, run

from producers.blobstore import LocalBlobStore
from producers.claimcheck import resolve_claim_check
from producers.evidence import TrustStore, load_signer, verify_capture
from producers.transports.spool.files import read_spool
from schemas.codec import decode

ROOT = Path(__file__).resolve().parents[2]
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
AUDITWHEEL = (sys.executable, "-m", "auditwheel")


def _in_venv(venv: Venv, script: str, *args: str, **env: str) -> str:
    # -I: no user site, no PYTHON* variables, and not the current directory on sys.path.
    cmd: list[str | Path] = [venv.python, "-I", "-c", textwrap.dedent(script), *args]
    proc = run(cmd, cwd=venv.workdir, env=clean_env(venv.path, **env), timeout=120)
    return checked(proc)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_base_install_has_no_server_package_and_every_sdk_module_imports(base_venv: Venv) -> None:
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
    base_venv: Venv, tmp_path: Path
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
# The Node SDK (its own npm package) is in neither distribution ([tool.maturin] exclude).
NOT_IN_SDIST = re.compile(r"producers/typescript/.*")
PACKAGES = ("schemas", "producers", "consumers")


def _sources(built: Built) -> set[str]:
    return {
        f.relative_to(built.src).as_posix()
        for package in PACKAGES
        for f in (built.src / package).rglob("*")
        if f.is_file()
    }


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_wheel_ships_every_package_file_and_the_core_and_no_rust_source(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        shipped = {n for n in wheel.namelist() if not n.startswith("agent_blackbox-")}
    sources = _sources(built)
    assert {s for s in sources if NOT_SHIPPED.fullmatch(s)} >= {
        "producers/native/Cargo.toml",
        "producers/native/Cargo.lock",
        "producers/native/src/lib.rs",
    }
    # The rule is general: every file under the three packages ships, whatever its kind (templates and
    # static files a room adds under consumers/ included), except the crate's sources and build files.
    expected = {s for s in sources if not NOT_SHIPPED.fullmatch(s)} | {"producers/native/_core.abi3.so"}
    assert shipped == expected, (sorted(expected - shipped), sorted(shipped - expected))
    assert not {s for s in shipped if s.endswith(".rs")}
    # the data files the code opens at run time, and the type information
    assert {
        "schemas/capture/v3.avsc",
        "schemas/capture/v4.avsc",
        "schemas/examples/capture.unsealed.json",
        "consumers/index/ddl.sql",
        "consumers/retention/default_policy.toml",
        "schemas/py.typed",
        "producers/py.typed",
        "consumers/py.typed",
        "producers/native/_core.pyi",
    } <= shipped


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_wheel_is_one_abi3_manylinux2014_wheel_auditwheel_accepts(built: Built) -> None:
    # one wheel for every CPython from 3.11, on every Linux with glibc 2.17 or later
    assert built.wheel.name == (
        f"agent_blackbox-{PYPROJECT['project']['version']}"
        "-cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    )
    with zipfile.ZipFile(built.wheel) as wheel:
        tags = {
            line.split(": ", 1)[1]
            for line in wheel.read(f"agent_blackbox-{PYPROJECT['project']['version']}.dist-info/WHEEL")
            .decode()
            .splitlines()
            if line.startswith("Tag: ")
        }
    assert tags == {"cp311-abi3-manylinux2014_x86_64", "cp311-abi3-manylinux_2_17_x86_64"}
    # auditwheel (pinned in the dev extra) reads the core's ELF: every versioned glibc symbol it needs
    # is in glibc 2.17, and it links no library outside the manylinux policy
    out = checked(run([*AUDITWHEEL, "show", built.wheel], cwd=built.src, env=clean_env(), timeout=120))
    assert re.search(r'is consistent with the following platform tag:\s+"manylinux_2_17_x86_64"', out), out
    assert MANYLINUX == "manylinux2014"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_sdist_holds_the_crate_and_the_packages_and_the_wheel_was_built_from_it(built: Built) -> None:
    version = PYPROJECT["project"]["version"]
    with tarfile.open(built.sdist) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    top = f"agent_blackbox-{version}"
    assert built.sdist.name == f"{top}.tar.gz"
    packaged = {n for n in names if n.startswith(tuple(f"{p}/" for p in PACKAGES))}
    # a source install compiles the crate from the committed lock file, everything else as in git
    assert packaged == {s for s in _sources(built) if not NOT_IN_SDIST.fullmatch(s)}
    assert {"pyproject.toml", "README.md", "PKG-INFO"} <= names
    assert not {n for n in names if "/target/" in n or n.endswith((".so", ".pyc"))}
    # maturin packs the sdist first and builds the wheel from it: the source install works
    assert "Building wheels from source distribution" in built.log, built.log


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_wheel_with_the_server_extra_runs_the_demo_with_the_native_core_and_no_toolchain(
    server_venv: Venv,
) -> None:
    data = server_venv.workdir / "blackbox-demo"
    env = clean_env(server_venv.path, BLACKBOX_NATIVE="require")  # a missing core fails the demo
    size: list[str | Path] = ["--decisions", "300", "--days", "3"]
    demo: list[str | Path] = [server_venv.blackbox, "demo", "--dir", data, *size]
    out = checked(run(demo, cwd=server_venv.workdir, env=env, timeout=600))
    conclusion = re.search(
        r"Root cause: system prompt (v[\d.]+).*? Replaying (dec_\w+) reproduced", out, re.S
    )
    assert conclusion, out
    # the demo's data, read back by the wheel's CLI: the failed decision verifies from its segment
    verify = [server_venv.blackbox, "verify", conclusion[2]]
    shown = checked(
        run(verify, cwd=server_venv.workdir, env=env | {"BLACKBOX_DATA_DIR": str(data)}, timeout=300)
    )
    assert shown.startswith(f"verified: {conclusion[2]} key=sha256:") and "index rows match" in shown, shown
    native = _in_venv(server_venv, "import producers.native as n; print(n.status(), n.__file__)")
    assert native.startswith("native ") and "site-packages" in native


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
def test_without_the_compiled_core_it_warns_naming_why_and_seals_the_same_bytes(base_venv: Venv) -> None:
    seed = base64.b64encode(SEED).decode()
    natively = json.loads(_in_venv(base_venv, SEAL_EXAMPLES, seed))
    assert natively["status"] == "native" and natively["warnings"] == []

    hidden = base_venv.core.with_name("hidden-core.bin")
    base_venv.core.rename(hidden)  # the .so removed from the installed package
    try:
        reference = json.loads(_in_venv(base_venv, SEAL_EXAMPLES, seed))
        proc = run(
            [base_venv.python, "-I", "-c", "from producers import native; native.core()"],
            cwd=base_venv.workdir,
            env=clean_env(base_venv.path, BLACKBOX_NATIVE="require"),
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
def test_the_cli_without_the_server_extra_says_what_to_install(base_venv: Venv) -> None:
    proc = run(
        [base_venv.blackbox, "--help"], cwd=base_venv.workdir, env=clean_env(base_venv.path), timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert re.fullmatch(
        r"the blackbox CLI needs the server extra: pip install 'agent-blackbox\[server\]' \(missing module: \w+\)",
        line,
    ), line


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_s3_blob_store_without_minio_names_the_extra(base_venv: Venv) -> None:
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
def test_an_evidence_bundle_verifies_offline_with_the_base_sdk_only(base_venv: Venv, tmp_path: Path) -> None:
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
    proc = run([*cmd, "--log-key", key], cwd=base_venv.workdir, env=clean_env(base_venv.path), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("verified: dec_01J9Z8K2V6XAMPLE key=sha256:")
    assert "in log example.org/log at leaf 0 of 2" in proc.stdout

    # one changed byte in the capture is refused, naming the part
    document = json.loads(bundle.read_text(encoding="utf-8"))
    document["capture"]["executionTrace"]["finalOutputText"] += "!"
    tampered = base_venv.workdir / "tampered.json"
    tampered.write_text(json.dumps(document), encoding="utf-8")
    proc = run(
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
        env=clean_env(base_venv.path),
        timeout=120,
    )
    assert proc.returncode == 1 and "part=capture.executionTrace.finalOutputText" in proc.stdout, proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_readmes_build_and_install_commands_are_the_ones_tested(built: Built) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Install and deploy", 1)[1]
    build, install = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)[0].strip().splitlines()
    # the build the fixture runs (built in a copy, out to a temporary directory, for this interpreter)
    assert shlex.split(build) == ["maturin", *MATURIN_BUILD, "--out", "dist"]
    assert shlex.split(install) == ["pip", "install", f"dist/{built.wheel.name}"]
