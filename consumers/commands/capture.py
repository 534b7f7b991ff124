"""``blackbox capture FILE.json``: validate, seal and emit one capture written in the JSON form.

Everything is checked before anything is sent: the file is at most ``--max-bytes`` (64 MiB by
default; read in chunks, so ``/dev/zero`` or an endless pipe is refused at the limit), the JSON
parses (else line and column) and nests at most ``MAX_DOCUMENT_DEPTH`` levels, the capture
satisfies the contract (else the field path), every supplied hash agrees with its content (else
the hash field's path), a signing key is configured, the key's validity window in the trust store
(when the store knows the key) covers ``capturedAt``, and the sealed capture encodes. Then it goes
through the configured transport (claim check if large), is flushed, and its decision id is
printed. Any failure prints ``error: <path>: <reason>`` and exits 2. Personal data is redacted
before sealing, the original sealed under a data key, as the Recorder does (``BLACKBOX_REDACT``).

The article's own ``replay/v1`` form is accepted as is: the fields blackbox added default when
absent — ``captureLevel`` from the capture policy (``BLACKBOX_CAPTURE_SAMPLE_ONE_IN``), not
``consequential``, ``outcome`` unknown, and an unsigned ``signature`` (the configured key signs).
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from consumers import terminal
from consumers.app.runtime import open_runtime
from producers.unrecordable import MAX_DEPTH
from schemas.errors import BlackboxError, ContractError, TransportError

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from producers.evidence import TrustStore

__all__ = ["DEFAULT_MAX_BYTES", "MAX_DOCUMENT_DEPTH", "capture_command", "register"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# The recorder's limit for one value, plus the capture's own nesting around its deepest content
# part (capture > executionTrace > toolCalls > call > input).
MAX_DOCUMENT_DEPTH = MAX_DEPTH + 4
_CHUNK = 1 << 20


def _read_bytes(file: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` of ``file`` ('-': stdin); refuses more without reading it all."""
    too_big = ContractError(
        f"larger than {max_bytes} bytes, the limit (raise it with --max-bytes)", path=file
    )
    try:
        if file == "-":
            return _read_limited(sys.stdin.buffer, max_bytes, too_big)
        with open(file, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISDIR(info.st_mode):
                raise ContractError("cannot read: is a directory", path=file)
            if stat.S_ISREG(info.st_mode) and info.st_size > max_bytes:
                raise too_big
            return _read_limited(handle, max_bytes, too_big)
    except OSError as exc:
        raise ContractError(f"cannot read: {exc}", path=file) from exc


def _read_limited(stream: IO[bytes], max_bytes: int, too_big: ContractError) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := stream.read(min(_CHUNK, max_bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise too_big
    return b"".join(chunks)


def _read_json(file: str, max_bytes: int = DEFAULT_MAX_BYTES) -> Any:
    data = _read_bytes(file, max_bytes)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ContractError(f"cannot read: not UTF-8 text ({exc})", path=file) from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path=file
        ) from exc
    except RecursionError as exc:  # the parser's own guard, far below a crash
        raise ContractError(
            f"JSON nested deeper than {MAX_DOCUMENT_DEPTH} levels (the limit)", path=file
        ) from exc
    except ValueError as exc:  # e.g. an integer literal of more than 4300 digits
        raise ContractError(f"invalid JSON: {exc}", path=file) from exc
    too_deep = _too_deep(document, MAX_DOCUMENT_DEPTH)
    if too_deep is not None:
        raise ContractError(f"JSON nested deeper than {MAX_DOCUMENT_DEPTH} levels (the limit)", path=too_deep)
    return document


def _too_deep(document: Any, limit: int) -> str | None:
    """The path of the first container nested deeper than ``limit`` levels, or None (iterative)."""
    stack: list[tuple[Any, str, int]] = [(document, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict):
            items: Any = ((f"{path}.{key}" if path else str(key), item) for key, item in value.items())
        elif isinstance(value, list):
            items = ((f"{path}[{index}]", item) for index, item in enumerate(value))
        else:
            continue
        if depth > limit:
            return path or "<root>"
        stack.extend((item, where, depth + 1) for where, item in items if isinstance(item, (dict, list)))
    return None


def with_article_defaults(document: Any, *, policy: Any) -> Any:
    """The article's ``replay/v1`` form completed with blackbox's fields, where they are absent:
    not consequential, outcome unknown, unsigned, and the capture level the policy gives."""
    if not isinstance(document, dict):
        return document  # the contract check names what is wrong
    document = dict(document)
    document.setdefault("consequential", {"flagged": False, "reason": None})
    document.setdefault("outcome", {"status": "unknown", "reason": None})
    document.setdefault("signature", {"algorithm": "ed25519", "publicKeyRef": None, "signatureBytes": None})
    consequential = document["consequential"]
    decision_id = document.get("decisionId")
    if (
        document.get("captureLevel") is None
        and isinstance(decision_id, str)
        and isinstance(consequential, dict)
    ):
        document["captureLevel"] = policy.level(
            decision_id=decision_id, consequential=consequential.get("flagged") is True
        )
    return document


def _check_key_window(sealed: dict[str, Any], *, signer: Any, store: TrustStore) -> None:
    """Refuse a capture the trust store would refuse for its signing time (the key's validity
    window, or a revocation). A key the store does not know is left to the consumers."""
    from producers.evidence.trust import parse_time
    from schemas.errors import KeyNotTrusted

    if signer.key_id not in store:
        return
    captured_at = sealed["capturedAt"]
    try:
        store.check(signer.key_id, parse_time(captured_at))
    except KeyNotTrusted as exc:
        raise ContractError(
            f"{captured_at} lies outside what the signing key may sign ({exc}); consumers would "
            "quarantine this capture",
            path="capturedAt",
        ) from exc


def _signer(settings: Any) -> Any:
    from producers.evidence.keys import configured_signer

    signer = configured_signer(settings.signing_key, settings.signing_key_b64)
    if signer is None:
        raise ContractError(
            "no signing key configured; create one with `blackbox keys generate` and set "
            "BLACKBOX_SIGNING_KEY=<private key file> (or BLACKBOX_SIGNING_KEY_B64)",
            path="signing_key",
        )
    return signer


def emit_capture_file(file: str, *, rt: Runtime, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Validate, seal and deliver the capture in ``file``; return its decision id."""
    from producers.evidence import seal
    from producers.policy import CapturePolicy
    from producers.privacy.protect import Redactor, vault_from_settings
    from producers.recorder import CaptureFailure, Recorder
    from schemas.codec import encode_capture
    from schemas.models import Capture

    settings = rt.settings
    policy = CapturePolicy.from_settings(settings)
    raw = with_article_defaults(_read_json(file, max_bytes), policy=policy)
    capture = Capture.from_json(raw).to_json()
    signer = _signer(settings)
    redactor = Redactor.create(settings.redact, vault=vault_from_settings(settings, rt.blob_store))
    if redactor is not None:  # as the Recorder does: personal data never leaves unredacted
        capture = redactor.protect(capture, owned=True)
    sealed = policy.apply(seal(capture, signer))
    _check_key_window(sealed, signer=signer, store=rt.trust_store)
    encode_capture(sealed)  # refuse what cannot be stored before anything is sent

    failures: list[CaptureFailure] = []
    recorder = Recorder.from_settings(
        settings,
        agent_id=sealed["agentId"],
        runtime_id=sealed.get("runtimeId"),
        signer=signer,
        on_error=failures.append,
        consequential_wait=timeout,
        transport_options={"delivery_timeout": timeout},
    )
    recorder.record(sealed)
    delivered = recorder.close(timeout)
    if failures:
        raise failures[0].error
    if not delivered:
        raise TransportError(f"not delivered within {timeout}s")
    return str(sealed["decisionId"])


def capture_command(
    file: Annotated[
        str, typer.Argument(help="Capture in the JSON form (replay/v1 + blackbox fields); '-' reads stdin.")
    ],
    timeout: Annotated[float, typer.Option(help="Seconds to wait for delivery.")] = 30.0,
    max_bytes: Annotated[
        int, typer.Option(min=1, help="Refuse a file larger than this many bytes (default 64 MiB).")
    ] = DEFAULT_MAX_BYTES,
) -> None:
    """Seal (hash, Merkle root, sign) and emit one capture; print its decision id."""
    try:
        with open_runtime() as rt:
            decision_id = emit_capture_file(file, rt=rt, timeout=timeout, max_bytes=max_bytes)
    except BlackboxError as exc:
        terminal.echo(f"error: {terminal.clean(exc)}", err=True)
        raise typer.Exit(2) from exc
    terminal.echo(terminal.clean(decision_id))


def register(app: typer.Typer) -> None:
    app.command("capture")(capture_command)
