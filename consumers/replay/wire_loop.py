"""One run of a wire capture: the recorded tool loop, driven by what the model answers now.

Call 1 is the recorded first body (hash-checked, or with one part spliced for a variation), sent
unchanged. Each answer is read in the capture's format; every tool call it asks for is answered by
the sandbox from the recording, its arguments compared exactly as the API returned them (a JSON
string stays that string). When the model asked for exactly the tool calls the recording answers,
call N+1 is built as *this run's* call N plus what the recorded call N+1 appended to its history
(the assistant turn and the tool results), so a variation carries on through the loop; a recorded
call that is not such an append is sent as recorded (with the variation spliced in).

For the as-captured run, the body built for call N must equal the recorded bytes of call N; a byte
that differs is a :class:`~schemas.errors.ReplayDivergence` naming the model call and the offset.
The run ends at the first answer without tool calls, or after the last recorded call.
"""

from __future__ import annotations

from consumers.replay.agent_hook import AgentRun, StepLimitReached
from consumers.replay.sandbox import Sandbox
from consumers.replay.wire_client import WireClient
from consumers.replay.wire_request import WireInputs
from producers.wire.body import append_items, first_difference
from producers.wire.calls import WireResponse
from schemas.errors import BlackboxError, ModelClientError, ReplayDivergence

__all__ = ["run_wire"]


def run_wire(
    *,
    client: WireClient,
    inputs: WireInputs,
    sandbox: Sandbox,
    max_model_calls: int,
    as_captured: bool,
) -> AgentRun:
    """Replay ``inputs`` once; failures are recorded in the result, never raised."""
    sent: list[bytes] = []
    final: str | None = None
    stop: str | None = None
    error: Exception | None = None
    last: WireResponse | None = None
    try:
        for index, call in enumerate(inputs.calls):
            if index >= max_model_calls:
                raise StepLimitReached(f"more than {max_model_calls} model calls")
            if index and call.appended is not None:
                body = append_items(sent[-1], call.spec.history_key, call.appended)
            else:
                body = call.body
            if as_captured:
                offset = first_difference(body, call.recorded)
                if offset is not None:
                    raise sandbox.diverge(
                        f"model call {call.sequence}: the request the replay built differs from the recorded "
                        f"request at byte {offset}",
                        {"modelCall": call.sequence, "byte": offset},
                    )
            reply = client.send(call, body, captured_endpoint=inputs.captured_endpoint)
            sent.append(body)
            try:
                last = call.spec.reader.parse_response(reply.body.decode("utf-8"), streamed=reply.streamed)
            except Exception as exc:
                raise ModelClientError(
                    f"model call {call.sequence}: not a {call.spec.format} answer ({exc})"
                ) from exc
            for use in last.tool_calls:
                sandbox.call_tool(str(use.name), use.arguments)
            if not last.tool_calls or index + 1 == len(inputs.calls):
                final, stop = last.text, last.stop_reason
                break
            expected = call.tool_calls
            if expected is not None and len(last.tool_calls) != expected:
                raise sandbox.diverge(
                    f"model call {call.sequence}: the model asked for {len(last.tool_calls)} tool call(s) where "
                    f"the recording answers {expected} before model call {call.sequence + 1}",
                    {"modelCall": call.sequence, "toolCalls": len(last.tool_calls)},
                )
    except ReplayDivergence:
        pass  # recorded by the sandbox
    except StepLimitReached as exc:
        error, stop = exc, "max_steps"
    except BlackboxError as exc:
        error, stop = exc, "error"
    divergence = sandbox.divergence
    if divergence is not None:
        final, stop = None, "divergence"
    return AgentRun(
        final_output=final,
        stop_reason=stop or ("error" if last is None else "unknown"),
        tool_calls=tuple(sandbox.calls),
        model_calls=len(sent),
        external_reads=tuple(sandbox.external_state.reads),
        divergence=divergence,
        error=None if divergence is not None else error,
    )
