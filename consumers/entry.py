"""The ``blackbox`` console script: the CLI when the server extra is installed, one clear line when not.

``pip install agent-blackbox`` installs the SDK alone (an agent runtime needs no typer, chdb or
minio) but still installs this script. Importing the CLI there would end in a traceback; this module
imports nothing heavy, so it can say what to install instead.
"""

from __future__ import annotations

import sys

EXIT_MISSING_EXTRA = 2  # the CLI's exit code for any error it explains in one line
_OWN_PACKAGES = frozenset({"schemas", "producers", "consumers"})
SERVER_EXTRA_HINT = "the blackbox CLI needs the server extra: pip install 'agent-blackbox[server]'"


def main() -> None:
    """Run the CLI; a third-party module missing from the install prints one line and exits 2."""
    from schemas.errors import BlackboxError

    try:
        from consumers.cli import main as cli_main
    except BlackboxError as exc:
        # raised while the commands import, e.g. BLACKBOX_NATIVE=require when a module-level constant
        # is hashed without the native core: the same one line as any command's error
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_MISSING_EXTRA) from None
    except ModuleNotFoundError as exc:
        # Only a missing third-party module means "not installed with [server]"; one of ours missing
        # is a broken package and keeps its traceback.
        if (exc.name or "").partition(".")[0] in _OWN_PACKAGES:
            raise
        print(f"{SERVER_EXTRA_HINT} (missing module: {exc.name})", file=sys.stderr)
        raise SystemExit(EXIT_MISSING_EXTRA) from None
    cli_main()
