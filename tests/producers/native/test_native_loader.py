"""The loader's choice (``producers.native``): BLACKBOX_NATIVE=off / auto / require, a missing or
stale build, and what an operator sees. A missing build is simulated by halting the import of
``producers.native._core`` (``sys.modules[name] = None``); the real removal of the compiled file
from an installed wheel is tests/test_packaging.py's."""

from __future__ import annotations

import json
import subprocess
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from producers import native
from schemas.errors import NativeCoreUnavailable, SettingsInvalid

CORE = "producers.native._core"
ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "producers" / "evidence" / "golden" / "capture.signed.json"


@pytest.fixture(autouse=True)
def fresh_choice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Each test reads BLACKBOX_NATIVE anew and leaves the next test a fresh choice too."""
    monkeypatch.chdir(tmp_path)  # settings also read a .env from the working directory
    monkeypatch.delenv("BLACKBOX_NATIVE", raising=False)
    native.reset()
    yield
    native.reset()


def _missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, CORE, None)  # import halted: as if the .so were not installed


def _stale(monkeypatch: pytest.MonkeyPatch) -> None:
    old = types.ModuleType(CORE)
    old.ABI = native.ABI - 1  # type: ignore[attr-defined]  # built from older Rust sources
    monkeypatch.setitem(sys.modules, CORE, old)
    monkeypatch.setattr(native, "_core", old, raising=False)  # `import a.b as x` reads the attribute


def test_auto_uses_the_built_core_silently() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning fails the test
        core = native.core()
    assert core is not None and core.ABI == native.ABI
    assert native.status() == "native"


def test_off_never_imports_the_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_NATIVE", "off")
    _missing(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert native.core() is None
    assert native.status() == "python (BLACKBOX_NATIVE=off)"


def test_auto_without_the_core_warns_once_naming_why_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    _missing(monkeypatch)
    with pytest.warns(RuntimeWarning) as caught:
        assert native.core() is None
        assert native.core() is None  # the choice is made once: no second warning
    (warning,) = caught
    message = str(warning.message)
    assert message.startswith("blackbox: the native evidence core did not load: ")
    assert f"import of {CORE} halted" in message and "pure-Python reference" in message
    assert native.status().startswith("python (the native evidence core did not load: ")


def test_auto_refuses_a_stale_build_and_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    _stale(monkeypatch)
    with pytest.warns(RuntimeWarning, match=rf"built from other sources \(ABI {native.ABI - 1}, "):
        assert native.core() is None
    assert "reinstall agent-blackbox" in native.status()


@pytest.mark.parametrize("broken", [_missing, _stale], ids=["missing", "stale"])
def test_require_refuses_to_fall_back_in_one_line(
    monkeypatch: pytest.MonkeyPatch, broken: Callable[[pytest.MonkeyPatch], None]
) -> None:
    monkeypatch.setenv("BLACKBOX_NATIVE", "require")
    broken(monkeypatch)
    with pytest.raises(NativeCoreUnavailable) as raised:
        native.core()
    message = str(raised.value)
    assert message.startswith("BLACKBOX_NATIVE=require, but the native evidence core did not load: ")
    assert "\n" not in message


def test_reset_reads_the_setting_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_NATIVE", "off")
    assert native.core() is None
    monkeypatch.setenv("BLACKBOX_NATIVE", "auto")
    assert native.core() is None  # still the first choice
    native.reset()
    assert native.core() is not None


def test_a_bad_setting_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_NATIVE", "fast")
    with pytest.raises(SettingsInvalid) as raised:
        native.core()
    assert str(raised.value) == (
        "invalid settings: BLACKBOX_NATIVE='fast' is not allowed: one of 'auto', 'off', 'require'"
    )


def test_the_cli_under_require_without_the_core_prints_one_error_line(tmp_path: Path) -> None:
    """The real console entry point in a child process: ``error: ...`` on stderr, exit 2."""
    capture = tmp_path / "capture.json"
    capture.write_text(GOLDEN.read_text(encoding="utf-8"), encoding="utf-8")
    script = (
        "import sys; sys.modules[sys.argv[1]] = None\n"  # as if the .so were not installed
        "from consumers.entry import main\n"
        "sys.argv = ['blackbox', 'verify', '--file', sys.argv[2]]\n"
        "main()\n"
    )
    env = {"PATH": "/usr/bin:/bin", "BLACKBOX_NATIVE": "require", "BLACKBOX_DATA_DIR": str(tmp_path / "d")}
    proc = subprocess.run(
        [sys.executable, "-c", script, CORE, str(capture)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("error: BLACKBOX_NATIVE=require, but the native evidence core did not load: "), (
        line
    )
    assert json.loads(GOLDEN.read_text(encoding="utf-8"))["decisionId"] not in proc.stdout
