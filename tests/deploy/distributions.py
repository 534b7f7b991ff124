"""The distributions, built once per session, and clean virtual environments that install them
(the fixtures, re-exported by conftest.py).

``built`` runs ``maturin build --zig --compatibility manylinux2014 --sdist`` (maturin and ziglang are
pinned in the dev extra) on a copy of the sources: maturin packs the sdist, then builds the wheel
from that sdist, so the wheel proves the source install works too. The environments install the
wheel with ``--only-binary :all:`` on a PATH that holds no ``cargo`` or ``rustc``: nothing they
install may need a compiler.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "producers" / "native"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PIP = ("-m", "pip", "--disable-pip-version-check", "--no-input")
# The wheel's platform: glibc 2.17 and later (manylinux2014), whatever glibc built it.
MANYLINUX = "manylinux2014"
TOOLCHAIN = ("cargo", "rustc", "rustup")
# The build, as the README shows it: zig links the core against glibc 2.17's symbols; the sdist is
# packed first and the wheel built from it.
MATURIN_BUILD = ("build", "--zig", "--compatibility", MANYLINUX, "--sdist")


@dataclass(frozen=True, slots=True)
class Built:
    src: Path  # the copy the distributions were built from
    wheel: Path
    sdist: Path
    log: str  # maturin's output


@dataclass(frozen=True, slots=True)
class Venv:
    python: Path
    blackbox: Path
    workdir: Path  # outside the checkout, so the wheel is imported, never the source tree
    core: Path  # the compiled native core inside the environment
    path: str  # the PATH it runs with: its own bin first, no Rust toolchain


def run(
    cmd: list[str | Path], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def checked(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 0, f"{proc.args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def toolchain_free_path(*first: Path) -> str:
    """The caller's PATH without any directory holding a Rust toolchain, ``first`` in front."""
    keep = [
        d
        for d in os.environ.get("PATH", os.defpath).split(os.pathsep)
        if d and not any((Path(d) / tool).exists() for tool in TOOLCHAIN)
    ]
    path = os.pathsep.join([*(str(p) for p in first), *keep])
    assert all(shutil.which(tool, path=path) is None for tool in TOOLCHAIN), path
    return path


def clean_env(path: str | None = None, **extra: str) -> dict[str, str]:
    """The caller's environment (pip's index settings included) minus Python paths, BLACKBOX_* and
    Rust's variables; ``path`` replaces PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BLACKBOX_", "PYTHON", "CARGO", "RUSTUP", "RUSTC")) and k != "VIRTUAL_ENV"
    }
    if path is not None:
        env["PATH"] = path
    return env | extra


def not_sources(folder: str, names: list[str]) -> set[str]:
    """What a build must never pick up from the checkout: bytecode, Cargo's build tree, built cores."""
    ignored = {n for n in names if n == "__pycache__" or n.endswith(".pyc")}
    if Path(folder).resolve() == NATIVE:
        ignored |= {n for n in names if n == "target" or (n.startswith("_core") and n.endswith(".so"))}
    if Path(folder).resolve() == NATIVE.parent / "typescript":  # the Node SDK's installs and builds
        ignored |= {n for n in names if n in ("node_modules", "dist")}
    return ignored


def _maturin() -> Path:
    beside = Path(sysconfig.get_path("scripts")) / "maturin"
    found = beside if beside.exists() else shutil.which("maturin")
    if not found:
        pytest.fail("maturin is missing: it is in the dev extra (pip install -e '.[server,dev]')")
    return Path(found)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("dist")
    # Build from a copy: the checkout's compiled core and Cargo's build tree must not reach the sdist.
    src = root / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for package in ("schemas", "producers", "consumers"):
        shutil.copytree(ROOT / package, src / package, ignore=not_sources)
    out = root / "out"
    # Cargo's build tree beside the checkout's (gitignored), kept between runs: only the crate
    # recompiles.
    # maturin runs zig as `python3 -m ziglang`: python3 must be this interpreter, which has ziglang
    shim = root / "shim"
    shim.mkdir()
    (shim / "python3").symlink_to(sys.executable)
    env = clean_env(
        path=os.pathsep.join([str(shim), os.environ.get("PATH", os.defpath)]),
        CARGO_TARGET_DIR=str(NATIVE / "target" / "packaging-test"),
    )
    for key in ("CARGO_HOME", "RUSTUP_HOME"):  # where the toolchain lives, if it is not the default
        if key in os.environ:
            env[key] = os.environ[key]
    cmd: list[str | Path] = [_maturin(), *MATURIN_BUILD, "--out", out, "--interpreter", sys.executable]
    proc = run(cmd, cwd=src, env=env, timeout=1200)
    log = checked(proc) + proc.stderr
    (wheel,) = out.glob("agent_blackbox-*.whl")
    (sdist,) = out.glob("agent_blackbox-*.tar.gz")
    return Built(src=src, wheel=wheel, sdist=sdist, log=log)


def _venv(root: Path, requirement: str) -> Venv:
    venv = root / "venv"
    bin_dir = venv / "bin"
    path = toolchain_free_path(bin_dir)
    env = clean_env(path=path)
    checked(run([sys.executable, "-m", "venv", venv], cwd=root, env=env, timeout=120))
    python = bin_dir / "python"
    install: list[str | Path] = [python, *PIP, "install", "-q", "--only-binary", ":all:", requirement]
    checked(run(install, cwd=root, env=env, timeout=900))
    workdir = root / "work"
    workdir.mkdir()
    (core,) = venv.glob("lib/python3*/site-packages/producers/native/_core*.so")
    return Venv(python=python, blackbox=bin_dir / "blackbox", workdir=workdir, core=core, path=path)


@pytest.fixture(scope="session")
def base_venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The SDK alone: the wheel without extras."""
    return _venv(tmp_path_factory.mktemp("base-venv"), str(built.wheel))


@pytest.fixture(scope="session")
def server_venv(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The wheel with the server extra: the services and the CLI."""
    return _venv(tmp_path_factory.mktemp("server-venv"), f"{built.wheel}[server]")
