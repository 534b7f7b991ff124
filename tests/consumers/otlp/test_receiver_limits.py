"""The OTLP receiver as an exposed service (issue 25, issue 24 finding 6): bodies sized or chunked,
gzip and deflate under a size and ratio bound, partial success, 429 when delivery is saturated,
a bounded set of recorders under a flood of service names, idle connections that hold no thread
and are cut off, a byte cap on held orphan spans, no traceback when a client goes away, and
sender tokens scoped to agent ids.

Real HTTP against the real server (uvicorn) in this process; the captures go to a real spool.
"""

from __future__ import annotations

import base64
import gc
import json
import logging
import socket
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from typer.testing import CliRunner

from consumers.access import tokens_for
from consumers.app.settings import load_service_settings
from consumers.otlp import OtlpService, ReceiverOptions, parse_listen
from consumers.otlp.senders import SenderAuth
from producers.evidence import load_signer
from producers.integrations.genai_spans.span import Span
from producers.integrations.genai_spans.traces import TraceBuffer
from producers.transports.spool.files import read_spool
from schemas.codec import decode

SEED_B64 = base64.b64encode(bytes(range(32))).decode()
JSON = "application/json"


def settings(data_dir: Path) -> Any:
    return load_service_settings(
        data_dir=data_dir, transport="spool", blob="local", signing_key_b64=SEED_B64, capture_sample_one_in=1
    )


def open_service(data_dir: Path, **options: Any) -> OtlpService:
    service = OtlpService(
        settings(data_dir),
        signer=load_signer(b64=SEED_B64),
        options=ReceiverOptions(listen=parse_listen("127.0.0.1:0"), **options),
        tokens=tokens_for(settings(data_dir)),
    )
    return service.start()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "bb"


@pytest.fixture
def service(data_dir: Path) -> Iterator[OtlpService]:
    service = open_service(data_dir)
    yield service
    service.close(10)


def chat_span(
    trace: int, *, span: int = 1, parent: int | None = None, content: str = "Hola"
) -> dict[str, Any]:
    """A chat span of trace ``trace`` in the OTLP JSON mapping (a local root unless ``parent``)."""
    out: dict[str, Any] = {
        "traceId": f"{trace:032x}",
        "spanId": f"{span:016x}",
        "name": "chat gpt-go",
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225600250000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-go"}},
            {
                "key": "gen_ai.input.messages",
                "value": {
                    "stringValue": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": content}]}]
                    )
                },
            },
        ],
    }
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def request(*resources: tuple[str, list[dict[str, Any]]]) -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": name}}]},
                    "scopeSpans": [{"scope": {"name": "t"}, "spans": spans}],
                }
                for name, spans in resources
            ]
        }
    ).encode()


def spooled(service: OtlpService, data_dir: Path) -> list[dict[str, Any]]:
    assert service.recorders.flush(10)
    return [decode(record.value).value for record in read_spool(data_dir / "spool")]


def test_a_chunked_body_is_read_and_every_response_carries_the_security_headers(
    service: OtlpService, data_dir: Path
) -> None:
    body = request(("agt_node", [chat_span(1)]))

    def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding chunked, as the JS exporter sends
        for i in range(0, len(body), 100):
            yield body[i : i + 100]

    answer = httpx.post(service.url, content=chunks(), headers={"Content-Type": JSON})
    assert answer.status_code == 200, answer.text
    assert (
        answer.headers["cache-control"] == "no-store"
        and answer.headers["x-content-type-options"] == "nosniff"
    )
    (capture,) = spooled(service, data_dir)
    assert capture["agentId"] == "agt_node"
    refused = httpx.post(service.url, content=b"{}", headers={"Content-Type": "text/plain"})
    assert refused.status_code == 415 and refused.headers["cache-control"] == "no-store"


@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
def test_gzip_and_deflate_are_inflated(service: OtlpService, data_dir: Path, coding: str) -> None:
    body = request(("agt_z", [chat_span(2)]))
    wbits = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS, "raw-deflate": -zlib.MAX_WBITS}[coding]
    packer = zlib.compressobj(wbits=wbits)
    packed = packer.compress(body) + packer.flush()
    header = "gzip" if coding == "gzip" else "deflate"
    answer = httpx.post(
        service.url, content=packed, headers={"Content-Type": JSON, "Content-Encoding": header}
    )
    assert answer.status_code == 200, answer.text
    assert len(spooled(service, data_dir)) == 1


def test_a_bomb_is_refused_by_the_inflation_ratio_even_under_the_size_cap(
    service: OtlpService, data_dir: Path
) -> None:
    bomb = zlib.compress(b" " * 4_000_000, 9)  # ~4 KB that inflate to 4 MB (< the 16 MB cap): ratio ~1000
    answer = httpx.post(
        service.url, content=bomb, headers={"Content-Type": JSON, "Content-Encoding": "deflate"}
    )
    assert answer.status_code == 413 and "200x the sent size" in answer.json()["message"]
    assert spooled(service, data_dir) == []


def test_spans_for_agents_the_sender_may_not_send_for_are_a_partial_success(data_dir: Path) -> None:
    store = tokens_for(settings(data_dir))
    token, _ = store.create(caller="node-app", scope="sender", now=datetime.now(UTC), agents=("agt_mine",))
    service = open_service(data_dir)
    try:
        mixed = request(("agt_mine", [chat_span(3)]), ("agt_theirs", [chat_span(4)]))
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"}
        from consumers.otlp.decode import decode_request

        protobuf = decode_request(mixed, JSON).SerializeToString()
        answer = httpx.post(service.url, content=protobuf, headers=auth)
        assert answer.status_code == 200
        parsed = ExportTraceServiceResponse()
        parsed.ParseFromString(answer.content)
        assert parsed.partial_success.rejected_spans == 1
        assert "may not send for agent 'agt_theirs'" in parsed.partial_success.error_message
        only_theirs = httpx.post(
            service.url,
            content=request(("agt_theirs", [chat_span(5)])),
            headers={**auth, "Content-Type": JSON},
        )
        assert only_theirs.status_code == 403
        assert [c["agentId"] for c in spooled(service, data_dir)] == ["agt_mine"]
    finally:
        service.close(10)


def test_a_remote_sender_needs_a_sender_token_and_loopback_stays_open(data_dir: Path) -> None:
    store = tokens_for(settings(data_dir))
    sender, _ = store.create(caller="node-app", scope="sender", now=datetime.now(UTC), agents=("agt_a",))
    reader, _ = store.create(caller="ops", scope="operator", now=datetime.now(UTC))
    auth = SenderAuth(store)
    assert auth.identify(None, "127.0.0.1").agents is None  # loopback: open by default
    with pytest.raises(Exception, match="needs a bearer token"):
        auth.identify(None, "203.0.113.7")
    assert auth.identify(f"Bearer {sender}", "203.0.113.7").agents == ("agt_a",)
    with pytest.raises(Exception, match="not a sender token"):
        auth.identify(f"Bearer {reader}", "203.0.113.7")
    with pytest.raises(Exception, match="not valid"):
        auth.identify(f"Bearer {sender[:-3]}xyz", "203.0.113.7")

    # over real HTTP, from a non-loopback address of this host
    address = _non_loopback_address()
    service = OtlpService(
        settings(data_dir),
        signer=load_signer(b64=SEED_B64),
        options=ReceiverOptions(listen=parse_listen(f"{address}:0", allow_remote=True)),
        tokens=store,
    ).start()
    try:
        body = request(("agt_a", [chat_span(6)]))
        refused = httpx.post(service.url, content=body, headers={"Content-Type": JSON})
        assert refused.status_code == 401 and "needs a bearer token" in refused.json()["message"]
        accepted = httpx.post(
            service.url, content=body, headers={"Content-Type": JSON, "Authorization": f"Bearer {sender}"}
        )
        assert accepted.status_code == 200, accepted.text
        assert [c["agentId"] for c in spooled(service, data_dir)] == ["agt_a"]
    finally:
        service.close(10)


def _non_loopback_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outbound interface
        address = str(probe.getsockname()[0])
    assert not address.startswith("127."), "this test needs a non-loopback interface"
    return address


def test_sender_tokens_must_name_their_agents(data_dir: Path) -> None:
    from consumers.cli import app

    runner = CliRunner()
    env = {"BLACKBOX_DATA_DIR": str(data_dir)}
    bound = runner.invoke(app, ["access", "token", "create", "--caller", "n", "--scope", "sender"], env=env)
    assert bound.exit_code != 0 and "--agent ID" in str(bound.exception)
    misplaced = runner.invoke(
        app,
        ["access", "token", "create", "--caller", "n", "--scope", "operator", "--agent", "agt_a"],
        env=env,
    )
    assert misplaced.exit_code != 0 and "only for --scope sender" in str(misplaced.exception)
    made = runner.invoke(
        app,
        ["access", "token", "create", "--caller", "node-app", "--scope", "sender", "--agent", "agt_a"],
        env=env,
    )
    assert made.exit_code == 0, made.output
    token = made.stdout.splitlines()[0]
    assert SenderAuth(tokens_for(settings(data_dir))).identify(f"Bearer {token}", "203.0.113.7").agents == (
        "agt_a",
    )
    with pytest.raises(Exception, match="reads nothing"):  # and it opens no capture on the audit API
        from consumers.audit.auth import Authenticator

        Authenticator(
            tokens=tokens_for(settings(data_dir)), oidc=None, clock=lambda: datetime.now(UTC)
        ).authenticate(f"Bearer {token}")


def test_a_flood_of_service_names_keeps_the_recorders_threads_and_memory_bounded(data_dir: Path) -> None:
    service = open_service(data_dir, max_recorders=4)
    try:
        with httpx.Client() as client:
            client.post(
                service.url, content=request(("agt_warm", [chat_span(99)])), headers={"Content-Type": JSON}
            )
            gc.collect()
            tracemalloc.start()
            base_memory, base_threads = tracemalloc.get_traced_memory()[0], threading.active_count()
            for i in range(100):
                answer = client.post(
                    service.url,
                    content=request((f"agt_{i}", [chat_span(100 + i)])),
                    headers={"Content-Type": JSON},
                )
                assert answer.status_code == 200
                assert service.recorders.open_count <= 4
            assert service.recorders.flush(10)
            gc.collect()
            retained = tracemalloc.get_traced_memory()[0] - base_memory
            tracemalloc.stop()
        grown = threading.active_count() - base_threads
        # measured: ~110 KB and 3 threads with 4 recorders; ~1.7 MB and 100 threads with one per name
        assert grown <= 4 * 2, f"{grown} more threads after 100 distinct service names"
        assert retained < 600_000, f"{retained} bytes retained after 100 distinct service names"
    finally:
        assert service.close(10)  # every capture of every recorder closed on the way was delivered
    assert len({decode(r.value).value["agentId"] for r in read_spool(data_dir / "spool")}) == 101


def test_idle_recorders_are_closed(data_dir: Path) -> None:
    service = open_service(data_dir, idle_seconds=0.5)
    try:
        httpx.post(service.url, content=request(("agt_idle", [chat_span(7)])), headers={"Content-Type": JSON})
        assert service.recorders.open_count == 1
        deadline = time.monotonic() + 10
        while service.recorders.open_count and time.monotonic() < deadline:
            time.sleep(0.1)
        assert service.recorders.open_count == 0
        assert [c["agentId"] for c in [decode(r.value).value for r in read_spool(data_dir / "spool")]] == [
            "agt_idle"
        ]
    finally:
        service.close(10)


def test_idle_connections_hold_no_thread_and_are_cut_off(data_dir: Path) -> None:
    service = open_service(data_dir, read_idle_seconds=1.0)
    host, port = service.url.removeprefix("http://").split("/")[0].split(":")
    idle: list[socket.socket] = []
    try:
        base = threading.active_count()
        for _ in range(50):  # each announces 16 MB and sends nothing
            conn = socket.create_connection((host, int(port)))
            conn.sendall(
                b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 16000000\r\n\r\n"
            )
            idle.append(conn)
        time.sleep(0.3)
        assert threading.active_count() - base <= 2
        # meanwhile a real sender is served
        answer = httpx.post(
            service.url, content=request(("agt_busy", [chat_span(8)])), headers={"Content-Type": JSON}
        )
        assert answer.status_code == 200
        assert service.receiver.receiving_bytes == 0
        for conn in idle:  # each is answered 408 and closed after the idle limit
            conn.settimeout(10)
            reply = conn.recv(4096)
            assert reply.startswith(b"HTTP/1.1 408"), reply[:80]
    finally:
        for conn in idle:
            conn.close()
        service.close(10)


def test_spans_waiting_for_a_root_are_held_under_a_byte_cap() -> None:
    buffer = TraceBuffer(hold_seconds=3600, max_bytes=1_000_000)
    big = "x" * 300_000
    handed_over = []
    for trace in range(12):  # 12 traces whose root never comes, 300 KB each
        span = Span(
            trace_id=f"{trace:032x}",
            span_id=f"{1:016x}",
            parent_id=f"{9:016x}",
            name="chat",
            start_ns=0,
            end_ns=1,
            attributes={"gen_ai.operation.name": "chat", "gen_ai.input.messages": big},
            local_root=False,
        )
        handed_over += buffer.add([span])
        assert buffer.held_bytes <= 1_000_000
    assert len(buffer) == 3 and len(handed_over) == 9  # the oldest went on to be recorded, not dropped
    assert [t[0].trace_id for t in handed_over] == [f"{i:032x}" for i in range(9)]


def test_a_client_that_goes_away_mid_body_costs_no_traceback(
    service: OtlpService, caplog: pytest.LogCaptureFixture
) -> None:
    host, port = service.url.removeprefix("http://").split("/")[0].split(":")
    caplog.set_level(logging.DEBUG)
    for _ in range(5):
        conn = socket.create_connection((host, int(port)))
        conn.sendall(
            b'POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{"resourceSpans'
        )
        conn.close()
    time.sleep(0.5)
    gc.collect()
    answer = httpx.post(
        service.url, content=request(("agt_after", [chat_span(9)])), headers={"Content-Type": JSON}
    )
    assert answer.status_code == 200
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_saturated_delivery_is_429_with_retry_after(data_dir: Path) -> None:
    service = open_service(data_dir, max_backlog=0)
    try:
        answer = httpx.post(
            service.url, content=request(("agt_s", [chat_span(10)])), headers={"Content-Type": JSON}
        )
        assert answer.status_code == 429 and answer.headers["retry-after"] == "2"
        assert "waiting for delivery" in answer.json()["message"]
    finally:
        service.close(10)


def test_connections_that_never_finish_their_headers_are_closed() -> None:
    """uvicorn alone waits forever for headers: a few hundred silent sockets would take every place."""
    from consumers.web.app import build_app
    from consumers.web.server import WebServer

    with WebServer(build_app(routers=[]), headers_seconds=1.0) as server:
        host, port = server.url.removeprefix("http://").split(":")
        silent = [socket.create_connection((host, int(port))) for _ in range(20)]
        partial = [socket.create_connection((host, int(port))) for _ in range(20)]
        for conn in partial:
            conn.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        for conn in silent + partial:
            conn.settimeout(10)
            assert conn.recv(100) == b""  # closed by the server
            conn.close()
        assert time.monotonic() - started < 5
        with httpx.Client() as client:  # while a keep-alive client making requests is left alone
            for _ in range(3):
                assert client.get(f"{server.url}/healthz").status_code == 404
                time.sleep(0.6)
