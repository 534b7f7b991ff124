"""The committed TypeScript test vectors and schema copies are what the Python reference writes now.

When this fails, the contract or the reference changed: rerun
``python tests/producers/typescript/generate_vectors.py`` and let the TypeScript tests say whether
the SDK still reproduces every byte.
"""

from __future__ import annotations

import json

from generate_vectors import REPO, VECTORS, render


def test_committed_vectors_and_schema_copies_are_current() -> None:
    stale = [
        str(path.relative_to(REPO))
        for path, text in render().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert not stale, f"stale TypeScript vectors: {stale}; run tests/producers/typescript/generate_vectors.py"


def test_vectors_cover_refusals_every_capture_shape_and_the_number_forms() -> None:
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    refused = [entry["name"] for entry in vectors["canonical"] if entry["expected"] is None]
    assert len(refused) == 3 and all("surrogate" in name for name in refused)
    names = {capture["name"] for capture in vectors["captures"]}
    assert {"example", "edges", "structured-only"} <= names
    forms = {entry["canonical"] for entry in vectors["numbers"]}
    assert {"1e+21", "0.000001", "1e-7", "-0", "0"} - forms == {"-0"}  # -0 prints as 0
    assert any(entry["pythonJson"] == "-0.0" for entry in vectors["numbers"])


def test_vectors_cover_the_builtin_redaction_placeholders() -> None:
    redaction = json.loads(VECTORS.read_text(encoding="utf-8"))["redaction"]
    kinds = {placed[2] for text in redaction["texts"] for placed in text["placed"]}
    assert kinds == {"EMAIL", "CARD", "IBAN", "PHONE", "IP"}
    assert any(not text["placed"] for text in redaction["texts"])  # and text with nothing to redact
    assert redaction["capture"]["redactions"] and redaction["capture"]["originalHashes"]
