"""Test vectors for the TypeScript SDK, written from the Python reference (DESIGN decision 25).

``python tests/producers/typescript/generate_vectors.py`` rewrites
``producers/typescript/test/vectors/sealing.json`` and the schema copies the TypeScript package
ships (``producers/typescript/schemas/``); ``test_vectors_current.py`` fails when either is stale.
The TypeScript tests reproduce every byte here: RFC 8785 bytes (every float form, the UTF-16 key
order, every plane, escapes, null omission), text and JSON part hashes, manifest bytes, Merkle
leaves and roots, the DSSE PAE, ed25519 signatures under a fixed test key, and Avro single-object
bytes of capture/v3.

Inputs are the values a JavaScript program holds after ``JSON.parse`` (:func:`as_javascript_holds`):
numbers are doubles (an integral double within ±(2**53 - 1) is what Python's ``json`` reads back as
an ``int``), and object keys that are array indices come first in ascending order. Python ints
beyond 2**53 have no JavaScript number, so they appear only as refused canonical inputs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import re
import struct
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
TESTS = REPO / "tests"
for _folder in ("producers/evidence", "schemas"):
    if str(TESTS / _folder) not in sys.path:
        sys.path.append(str(TESTS / _folder))

from schemas_testdata import AWKWARD_TEXT, EVERY_PLANE, busy_capture, example, model_call  # noqa: E402
from test_evidence_canonical import APPENDIX_B, TESTDATA  # noqa: E402

from producers.context import render_chat_context  # noqa: E402
from producers.evidence import canonical_json, content_parts, merkle_root, pae, seal  # noqa: E402
from producers.evidence.dsse import b64encode  # noqa: E402
from producers.evidence.keys import Signer  # noqa: E402
from producers.evidence.manifest import MANIFEST_PAYLOAD_TYPE  # noqa: E402
from producers.evidence.payload import python_signing_payload  # noqa: E402
from producers.policy import CapturePolicy  # noqa: E402
from producers.privacy.detectors import builtin_detectors  # noqa: E402
from producers.privacy.redact import Placeholders, redact_capture, redact_text  # noqa: E402
from schemas import codec  # noqa: E402
from schemas.errors import ContractError  # noqa: E402

PACKAGE = REPO / "producers" / "typescript"
VECTORS = PACKAGE / "test" / "vectors" / "sealing.json"
SCHEMA_COPIES = {
    REPO / "schemas" / "capture" / "v3.avsc": PACKAGE / "schemas" / "capture-v3.avsc",
    REPO / "schemas" / "events" / "flag_v1.avsc": PACKAGE / "schemas" / "flag-v1.avsc",
    REPO / "schemas" / "events" / "claim_check_v1.avsc": PACKAGE / "schemas" / "claim-check-v1.avsc",
}
SEED = base64.b64decode((TESTS / "producers" / "evidence" / "golden" / "test-key.seed").read_text().strip())
KEY_NAME = "did:blackbox:test"
_SAFE = 2**53 - 1
_INDEX_KEY = re.compile(r"0|[1-9][0-9]*")


def as_javascript_holds(value: Any) -> Any:
    """``value`` as ``JSON.parse`` of its JSON text gives it to JavaScript, in Python's terms."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) <= _SAFE and not (value == 0 and math.copysign(1, value) < 0):
            return int(value)
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > _SAFE:
            raise ValueError(f"{value} has no JavaScript number")
        return value
    if isinstance(value, list):
        return [as_javascript_holds(item) for item in value]
    if isinstance(value, dict):
        indices = sorted(
            (key for key in value if _INDEX_KEY.fullmatch(key) and int(key) < 2**32 - 1), key=int
        )
        rest = [key for key in value if key not in indices]
        return {key: as_javascript_holds(value[key]) for key in indices + rest}
    return value


def _double(bits: str) -> float:
    number: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return number


def _bits(number: float) -> str:
    return struct.pack(">d", number).hex()


def _canonical_or_none(value: Any, *, omit: bool = False) -> str | None:
    try:
        return canonical_json(value, omit_null_members=omit).decode("utf-8")
    except ContractError:
        return None


def canonical_vectors() -> list[dict[str, Any]]:
    """Values and their RFC 8785 text (None: refused)."""
    every_bmp = "".join(  # the escapes, the ASCII and Latin ranges, both sides of the surrogates
        chr(c)
        for c in (*range(0x3000), *range(0xD780, 0xD800), *range(0xE000, 0xE100), *range(0xFF00, 0x10000))
    )
    keys = ["\ufb33", "😂", "\uffff", "\U00010000", "\ue000", "a", "", "é", "\U0010ffff", "aa", "\x00"]
    rng = random.Random(16)
    shuffled = []
    for _ in range(5):
        rng.shuffle(keys)
        shuffled.append({key: index for index, key in enumerate(keys)})
    deep: Any = "leaf"
    for _ in range(64):
        deep = [{"a": deep}]
    values: list[tuple[str, Any, bool]] = [
        ("awkward text", AWKWARD_TEXT, False),
        ("every plane", EVERY_PLANE, False),
        ("BMP ranges", every_bmp, False),
        ("escapes", '"\\/\b\f\n\r\t\x00\x1f\x7f\u2028', False),
        ("key from every plane", {EVERY_PLANE: EVERY_PLANE, AWKWARD_TEXT: 1}, False),
        ("null members kept", {"a": None, "b": {"c": None, "d": [None, {"e": None}]}, "f": 1.0}, False),
        ("null members omitted", {"a": None, "b": {"c": None, "d": [None, {"e": None}]}, "f": 1.0}, True),
        ("nested 128 containers", deep, False),
        ("empty", {"": [], "a": {}, "b": ""}, False),
        ("index keys", {"b": 1, "10": 2, "1": 3, "01": 4, "a": [True, False, None]}, False),
        ("lone high surrogate", "\ud800", False),
        ("lone low surrogate key", {"\udc00": 1}, False),
        ("lone surrogate inside", ["ok", "lone \udfff surrogate"], False),
    ]
    values += [(f"UTF-16 key order {i}", value, False) for i, value in enumerate(shuffled)]
    values += [(f"cyberphone {i}", json.loads(source), False) for i, (source, _) in enumerate(TESTDATA)]
    out = []
    for name, value, omit in values:
        held = as_javascript_holds(value)
        text = _canonical_or_none(held, omit=omit)
        entry: dict[str, Any] = {"name": name, "input": held, "omitNulls": omit, "expected": text}
        if text is not None:
            entry["sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        out.append(entry)
    return out


def number_vectors() -> list[dict[str, str]]:
    """Doubles by their bits: RFC 8785's form, and Python ``json``'s (the Avro JSON text's) form."""
    rng = random.Random(262)
    values = [_double(bits) for bits, _ in APPENDIX_B]
    values += [0.0, -0.0, 5e-324, 1e-7, 1e-6, 1e-5, 1e-4, 1e16, 1e21, 9.99e20, 2.0**53, 2.0**53 - 1, 0.1]
    values += [2.0**53 + 2, 1e15 + 0.5, 123456789012345680.0, 0.000123, 1e-4 * 1.5]
    for exponent in range(-324, 309, 7):
        for mantissa in (1.0, 1.5, 9.999999999999998, 3.3333333333333335, 1.2345678901234567):
            values.append(float(f"{mantissa!r}e{exponent}"))
    values += [_double(f"{rng.getrandbits(64):016x}") for _ in range(3000)]
    out = []
    for number in values:
        if not math.isfinite(number):
            continue
        for signed in (number, -number):
            held = as_javascript_holds(signed)
            out.append(
                {
                    "bits": _bits(signed),
                    "canonical": canonical_json(held).decode(),
                    "pythonJson": json.dumps(held),
                }
            )
    return out


def merkle_vectors() -> list[dict[str, Any]]:
    out = []
    for count in (0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17):
        leaves = [f"leaf {i} ✓".encode() * (i + 1) for i in range(count)]
        out.append({"leaves": [leaf.hex() for leaf in leaves], "root": merkle_root(leaves).hex()})
    return out


def pae_vectors() -> list[dict[str, str]]:
    cases = [
        (MANIFEST_PAYLOAD_TYPE, b'{"a":1}'),
        ("application/vnd.blackbox.flag+json", "日本語 ✓".encode()),
        ("", b""),
        ("x" * 300, b"\x00" * 1000),
    ]
    return [
        {"type": kind, "payload": payload.hex(), "pae": pae(kind, payload).hex()} for kind, payload in cases
    ]


def edge_capture() -> dict[str, Any]:
    """The schemas tests' hard capture, with what JavaScript numbers can hold."""
    capture = example()
    capture["runtimeId"] = "rt_" + EVERY_PLANE
    capture["input"]["requestPayload"] = {
        "z": 1,
        "a": 2,
        "10": "index keys come first in JavaScript",
        "2": "and in ascending order",
        "floats": [0.1, 1e-300, -0.0, 5e-324, 1.7976931348623157e308, 2.5, 880.0, 1e16, 1e21, 1.5e-7],
        "ints": [0, -1, _SAFE, -_SAFE],
        "text": AWKWARD_TEXT,
        EVERY_PLANE: "key from every plane",
        "nested": {"y": [True, False, None], "b": {}, "a": []},
    }
    config = capture["agentConfiguration"]
    config["systemPromptText"] = AWKWARD_TEXT
    config["toolSchemaJson"] = {"tools": [], "z": {"z": 1, "a": 2}}
    config["samplingParameters"] = {
        "top_p": 0.95,
        "temperature": 0,
        "vendor_x": {"z": 1, "a": [-0.0]},
        "max_tokens": None,
        "stop": ["</done>", EVERY_PLANE],
        "presence_penalty": -0.0,
        "frequency_penalty": 1.5,
        "seed": 2.5,
    }
    capture["renderedContext"]["text"] = AWKWARD_TEXT
    entries = capture["memoryState"]["workingSetEntries"]
    entries[0]["renderedContent"] = AWKWARD_TEXT + "   "
    entries[0]["retrievalScore"] = -0.0
    entries[1]["retrievalScore"] = 1e-300
    entries[0]["contextPosition"], entries[1]["contextPosition"] = 5, 2  # list order is not leaf order
    trace = capture["executionTrace"]
    trace["reasoningTokens"] = [EVERY_PLANE, "", "  \r\n"]
    trace["toolCalls"][0]["input"] = "a bare JSON string " + EVERY_PLANE
    trace["toolCalls"][0]["output"] = [1, "two", 3.0, None, {"z": 0, "a": -0.0}]
    trace["toolCalls"][1]["output"] = 1.2345678901234567e22
    trace["toolCalls"][1]["errorRef"] = "err_timeout"
    capture["externalState"]["observableExternals"][0]["capturedValue"] = {"z": 0.1, "a": 1e-300}
    trace["finalOutputText"] = AWKWARD_TEXT
    capture["fidelity"] = "wire"
    trace["modelCalls"] = [
        model_call(
            request=json.dumps({"messages": [AWKWARD_TEXT]}, ensure_ascii=False), response=EVERY_PLANE
        ),
        dict(model_call(sequence=2, response=None), streamed=True, complete=False, attempts=3, status=None),
    ]
    return capture


def structured_only(sealed: dict[str, Any]) -> dict[str, Any]:
    """A sealed capture's structured-only form: content gone, hashes kept (re-sealed as it is)."""
    capture = json.loads(json.dumps(sealed))
    capture["captureLevel"] = "structured-only"
    capture["input"]["requestPayload"] = None
    capture["agentConfiguration"]["systemPromptText"] = None
    capture["agentConfiguration"]["toolSchemaJson"] = None
    capture["renderedContext"]["text"] = None
    for entry in capture["memoryState"]["workingSetEntries"]:
        entry["renderedContent"] = None
    trace = capture["executionTrace"]
    trace["reasoningTokens"] = None
    trace["finalOutputText"] = None
    for call in trace["toolCalls"]:
        call["input"] = call["output"] = None
    for external in capture["externalState"]["observableExternals"]:
        external["capturedValue"] = None
    capture["signature"] = None
    return capture


def capture_vector(name: str, capture: dict[str, Any], signer: Signer) -> dict[str, Any]:
    held = as_javascript_holds(capture)
    sealed = seal(held, signer)
    signed = python_signing_payload(json.loads(json.dumps(sealed)), fill_root=False)
    payload = signed.payload
    signature = sealed["signature"]["signatureBytes"]
    return {
        "name": name,
        "input": held,
        "parts": content_parts(held),
        "manifest": payload.decode("utf-8"),
        "leaves": [leaf.decode("utf-8") for leaf in signed.leaves or []],
        "contextSetHash": sealed["memoryState"]["contextSetHash"],
        "paeSha256": hashlib.sha256(pae(MANIFEST_PAYLOAD_TYPE, payload)).hexdigest(),
        "signature": signature,
        "sealed": sealed,
        "avro": base64.b64encode(codec.encode_capture(sealed)).decode("ascii"),
    }


def capture_vectors(signer: Signer) -> list[dict[str, Any]]:
    base = example()
    empty = example()
    empty["memoryState"]["workingSetEntries"] = []
    empty["renderedContext"] = None
    empty["executionTrace"]["reasoningTokens"] = None
    vectors = [
        capture_vector("example", base, signer),
        capture_vector("edges", edge_capture(), signer),
        capture_vector("busy 20 KB", busy_capture(), signer),
        capture_vector("empty working set, no rendered context", empty, signer),
    ]
    vectors.append(capture_vector("structured-only", structured_only(vectors[0]["sealed"]), signer))
    return vectors


def sampling_vectors() -> dict[str, Any]:
    """Which decision ids the capture policy samples, for several one-in-N."""
    rng = random.Random(100)
    crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    ids = ["dec_" + "".join(rng.choice(crockford) for _ in range(26)) for _ in range(400)] + ["dec_日本語"]
    return {
        "ids": ids,
        "sampled": {
            str(n): [i for i in ids if CapturePolicy(sample_one_in=n).is_sampled(i)]
            for n in (0, 1, 2, 3, 7, 100)
        },
    }


def rendering_vectors() -> list[dict[str, Any]]:
    """``render_context``: chat messages text and UTF-8 byte spans, for awkward texts."""
    cases = [
        ("You are the agent.", [("mem_01", "note one"), ("mem_02", AWKWARD_TEXT)], "refund? ☕"),
        (AWKWARD_TEXT, [], EVERY_PLANE),
        ("", [("m", "")], ""),
    ]
    out = []
    for system, memory, user in cases:
        rendered = render_chat_context(system_prompt=system, memory=memory, user_message=user)
        out.append(
            {
                "systemPrompt": system,
                "memory": [list(pair) for pair in memory],
                "userMessage": user,
                "text": rendered.text,
                "spans": [span.to_json() for span in rendered.spans],
            }
        )
    return out


PERSONAL_TEXTS = (
    "Mail ada@example.com or ADA.Lovelace+x@mail.example.co.uk, twice: ada@example.com.",
    "Card 4111 1111 1111 1111, not 4111 1111 1111 1112; IBAN GB82 WEST 1234 5698 7654 32.",
    "Call +1 415-555-0132 or (415) 555-0199; from 10.0.0.1 and 2001:db8::1; 日本語 ✓ ada@example.com",
    "Nothing personal here: order 12345, 3.14159, version 1.2.3.4.5.",
)


def redaction_vectors() -> dict[str, Any]:
    """The built-in detectors and placeholders (BLACKBOX_REDACT=builtin): texts redacted in turn with
    one set of placeholders (the same value reads the same everywhere), and a whole capture."""
    detectors = builtin_detectors()
    placeholders = Placeholders()
    texts = []
    for text in PERSONAL_TEXTS:
        done = redact_text(text, detectors, placeholders)
        texts.append(
            {
                "input": text,
                "redacted": text if done is None else done.text,
                # (start, end) UTF-8 bytes of each placeholder in the redacted text, kind, placeholder
                "placed": [] if done is None else [list(placed) for placed in done.placed],
            }
        )
    capture = as_javascript_holds(example())
    capture["input"]["requestPayload"] = {"message": PERSONAL_TEXTS[0], "ids": [PERSONAL_TEXTS[1]]}
    capture["memoryState"]["workingSetEntries"][0]["renderedContent"] = PERSONAL_TEXTS[2]
    capture["executionTrace"]["finalOutputText"] = "Sent to ada@example.com."
    redacted = redact_capture(json.loads(json.dumps(capture)), detectors, owned=True)
    assert redacted is not None
    return {
        "texts": texts,
        "capture": {
            "input": capture,
            "redacted": redacted.capture,
            "redactions": [r.to_json() for r in redacted.redactions],
            "originalHashes": redacted.original_hashes,
        },
    }


def build() -> dict[str, Any]:
    signer = Signer.from_seed(SEED, name=KEY_NAME)
    return {
        "generatedBy": "tests/producers/typescript/generate_vectors.py (do not edit by hand)",
        "key": {
            "seed": base64.b64encode(SEED).decode("ascii"),
            "publicKey": signer.public_raw.hex(),
            "keyId": signer.key_id,
            "publicKeyRef": signer.public_key_ref,
        },
        "payloadType": MANIFEST_PAYLOAD_TYPE,
        "schemaFingerprints": {
            kind: (codec.MAGIC + codec.fingerprint(kind)).hex() for kind in ("capture", "flag", "claim_check")
        },
        "canonical": canonical_vectors(),
        "numbers": number_vectors(),
        "texts": [
            {"input": text, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
            for text in (AWKWARD_TEXT, EVERY_PLANE, "", "x" * 10_000)
        ],
        "merkle": merkle_vectors(),
        "pae": pae_vectors(),
        "signatures": [
            {"message": message.hex(), "signature": b64encode(signer.sign(message))}
            for message in (b"", b"blackbox", pae(MANIFEST_PAYLOAD_TYPE, b"{}"))
        ],
        "captures": capture_vectors(signer),
        "sampling": sampling_vectors(),
        "rendering": rendering_vectors(),
        "redaction": redaction_vectors(),
    }


def render() -> dict[Path, str]:
    """Every generated file and its text."""
    files = {VECTORS: json.dumps(build(), ensure_ascii=True, indent=1) + "\n"}
    for source, copy in SCHEMA_COPIES.items():
        files[copy] = source.read_text(encoding="utf-8")
    return files


def main() -> None:
    for path, text in render().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)} ({len(text):,} characters)")


if __name__ == "__main__":
    main()
