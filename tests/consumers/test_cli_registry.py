"""The CLI lists its command modules: one that fails to import is an error, never a command that
silently disappears (issue 9, item 8)."""

from __future__ import annotations

import subprocess
import sys


def test_a_command_module_that_fails_to_import_fails_the_cli() -> None:
    # A meta-path finder that refuses one command module, as a broken install would.
    program = (
        "import sys\n"
        "class Broken:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'consumers.commands.replay':\n"
        "            raise ModuleNotFoundError(\"No module named 'consumers.commands.replay'\", name=name)\n"
        "sys.meta_path.insert(0, Broken())\n"
        "import consumers.cli\n"
    )
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "ImportError" in out.stderr and "replay" in out.stderr


def test_every_listed_command_is_registered() -> None:
    import typer.main

    from consumers.cli import app

    names = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    expected = {"capture", "verify", "consume", "show", "trends", "query", "compact", "hold", "release"}
    expected |= {"flag", "replay", "bisect", "regress", "demo", "report", "keys"}
    expected |= {"serve", "export", "access"}  # the audit endpoint, evidence bundles, tokens and requests
    assert expected <= names
