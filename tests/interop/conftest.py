"""The interop tests build captures with the ingest tests' builders (``ingest_testdata``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "consumers" / "ingest"))
