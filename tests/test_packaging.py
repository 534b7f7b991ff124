"""``pip install agent-blackbox`` is the SDK alone; ``agent-blackbox[server]`` adds the services and the CLI.

What the metadata, the build backend, the image and the docs promise; the built wheel itself is
installed and run in tests/deploy/test_wheel.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


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
    # a runtime judging by its pact needs only the CEL engine, pinned as the server has it
    assert extras["pacts"] == ["common-expression-language==0.10.0"]
    assert set(extras["pacts"]) <= set(extras["server"])
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


def test_the_image_builds_the_tested_wheel_in_a_rust_stage_and_runs_it_without_a_compiler_as_non_root() -> (
    None
):
    from packaging.requirements import Requirement

    (build_image, build), (run_image, run) = _dockerfile_stages()
    assert build_image.startswith("rust:") and build[0].endswith(" AS build")
    assert run_image.startswith("python:3.11-slim")
    builds = " ".join(build)
    # the build tools pinned as in the dev extra, so the image's wheel is the one tests/deploy checks
    pins = dict(re.findall(r"'(maturin|ziglang)==([\d.]+)'", builds))
    dev = {
        _distribution(r): r.split("==", 1)[1] for r in PYPROJECT["project"]["optional-dependencies"]["dev"]
    }
    assert pins == {"maturin": dev["maturin"], "ziglang": dev["ziglang"]}, pins
    assert pins["maturin"] in Requirement(PYPROJECT["build-system"]["requires"][0]).specifier
    assert "maturin build --zig --compatibility manylinux2014" in builds and "cargo fetch --locked" in builds
    runs = " ".join(run)
    assert "COPY --from=build /wheels" in runs
    assert not re.search(r"apt-get|cargo|rustc|rustup|gcc|maturin|zig", runs), "a compiler in the final image"
    assert '--only-binary :all: "${wheel}[server]"' in runs
    assert 'n.status(); sys.exit(s != "native" and s)' in runs  # the build fails if the core does not load
    # a numeric non-root user (Kubernetes' runAsNonRoot can only check a number)
    (user,) = [line.split()[1] for line in run if line.startswith("USER ")]
    assert user.isdigit() and int(user) > 0
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
