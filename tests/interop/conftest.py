"""The interop tests' fixtures (interop_world.py holds them and the helpers); the witness tests build
captures with the ingest tests' builders (``ingest_testdata``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "consumers" / "ingest"))

from interop_world import blackbox_env, serve

__all__ = ["blackbox_env", "serve"]
