"""Seal / verify cost for a ~20 KB capture, side by side with the floor, in one run.

Run: ``python tests/benchmarks/bench_evidence.py [--runs N]``. The floor is what any
signed capture costs: one sha256 over the encoded JSON plus one ed25519 signature (seal), or one
ed25519 verification (verify). Prints the best of several rounds, in microseconds per capture.

The verify goal (issue 15) is ``verify <= 1.5x floor: ed25519 verify``. ``verify`` runs on the
native core when it loads (``BLACKBOX_NATIVE``); ``verify (python reference)`` is the same call
with the core switched off, in the same run, so the two ratios compare like with like.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "producers" / "evidence"))
sys.path.insert(0, str(ROOT))

from conftest import KEY_WINDOW_START, golden_signer, large_capture

from producers import native
from producers.evidence import TrustStore, content_parts, manifest_bytes, seal, verify_capture
from producers.evidence.seal import _copy


def best_of(function: Callable[[], object], *, runs: int, rounds: int = 5) -> float:
    function()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(runs):
            function()
        best = min(best, (time.perf_counter() - start) / runs)
    return best * 1e6


def best_of_owned(
    function: Callable[[dict], object], make: Callable[[], dict], *, runs: int, rounds: int = 5
) -> float:
    """Like best_of, on a fresh input each call, built (and frozen out of the GC's way) beforehand."""
    best = float("inf")
    for _ in range(rounds):
        inputs = [make() for _ in range(runs)]
        gc.collect()
        gc.freeze()
        start = time.perf_counter()
        for value in inputs:
            function(value)
        best = min(best, (time.perf_counter() - start) / runs)
        del inputs
        gc.unfreeze()
    return best * 1e6


def measure(runs: int = 400) -> dict[str, float]:
    capture = large_capture()
    signer = golden_signer()
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=KEY_WINDOW_START)
    sealed = seal(capture, signer)
    data = json.dumps(capture).encode()
    signature = signer.sign(data)
    return {
        "json bytes": float(len(data)),
        "floor: sha256 + ed25519 sign": best_of(
            lambda: signer.sign(hashlib.sha256(data).digest()), runs=runs
        ),
        "floor: ed25519 verify": best_of(lambda: signer.public_key.verify(signature, data), runs=runs),
        "deep copy": best_of(lambda: _copy(capture), runs=runs),
        "content part hashes": best_of(lambda: content_parts(sealed), runs=runs),
        "manifest bytes": best_of(lambda: manifest_bytes(sealed), runs=runs),
        "seal": best_of(lambda: seal(capture, signer), runs=runs),
        "seal copy=False": best_of_owned(
            lambda c: seal(c, signer, copy=False), lambda: _copy(capture), runs=runs
        ),
        "verify": best_of(lambda: verify_capture(sealed, trust), runs=runs),
        "verify (python reference)": _reference(lambda: verify_capture(sealed, trust), runs=runs),
    }


def _reference(function: Callable[[], object], *, runs: int) -> float:
    """``best_of`` with the native core switched off (BLACKBOX_NATIVE=off), then restored."""
    before = os.environ.get("BLACKBOX_NATIVE")
    os.environ["BLACKBOX_NATIVE"] = "off"
    native.reset()
    try:
        return best_of(function, runs=runs)
    finally:
        if before is None:
            del os.environ["BLACKBOX_NATIVE"]
        else:
            os.environ["BLACKBOX_NATIVE"] = before
        native.reset()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=400)
    results = measure(parser.parse_args().runs)
    print(f"native core: {native.status()}")
    for name, value in results.items():
        print(f"{name:32s} {value:10.1f}")
    floor = results["floor: ed25519 verify"]
    print(f"{'verify / floor (ratio)':32s} {results['verify'] / floor:10.2f}   (goal <= 1.5)")
    print(f"{'python verify / floor (ratio)':32s} {results['verify (python reference)'] / floor:10.2f}")


if __name__ == "__main__":
    main()
