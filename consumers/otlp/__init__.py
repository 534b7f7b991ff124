"""``blackbox otlp``: an OTLP/HTTP trace receiver that turns GenAI spans from any runtime into captures.

Runtimes in any language that export OTLP (the official GenAI instrumentations, OpenInference,
OpenLLMetry, PydanticAI/Logfire ...) point their trace exporter at it; each decision their spans
describe (:mod:`producers.integrations.genai_spans`) is recorded with fidelity ``semantic``, signed
with the service's own key and delivered through the configured transport.

- :mod:`.decode` — the request (protobuf or JSON) into checked spans, whole or refused;
- :mod:`.receiver` — admission, checks and recording, and the answer; :mod:`.routes` — ``POST
  /v1/traces`` in the one HTTP application; :mod:`.senders` — who may send for which agents;
  :mod:`.listen` — where ``blackbox otlp`` listens;
- :mod:`.recorders` — a bounded set of Recorders, one per agent; :mod:`.service` — all of it, opened
  and closed as one.
"""

from consumers.otlp.decode import MalformedRequest
from consumers.otlp.listen import DEFAULT_LISTEN, ListenRefused, parse_listen
from consumers.otlp.receiver import OtlpReceiver
from consumers.otlp.service import OtlpService, ReceiverOptions

__all__ = [
    "DEFAULT_LISTEN",
    "ListenRefused",
    "MalformedRequest",
    "OtlpReceiver",
    "OtlpService",
    "ReceiverOptions",
    "parse_listen",
]
