"""Record LangChain / LangGraph runs: ``graph.invoke(inputs, config={"callbacks": [handler]})``.

:class:`BlackboxCallbackHandler` is a langchain-core callback handler that turns each *top-level
run* (a run without a parent, or whose parent this handler never saw) into one decision rebuilt
from callbacks, fidelity ``semantic``:

* chat model start → ``agentConfiguration`` (model, first system message, tools and sampling from
  the invocation parameters; the model version from the first response) and ``renderedContext``:
  the first call's messages as an OpenAI chat messages array, with the spans of the system prompt
  and of each working-set entry whose text occurs in it;
* retriever end → ``memoryState`` entries: the document's id (its ``id``, else ``metadata["id"]``,
  else ``sha256:`` + 16 hex digits of its text), its text, a score when the metadata carries one,
  provenance from well-known metadata keys (:data:`PROVENANCE_KEYS`; absent when none is there),
  the retriever's name as the retrieval method;
* tool start/end/error → ``executionTrace.toolCalls``, input and output as given (a tool message's
  content), in the order the tools started; an error's type and message as ``errorRef``;
* chain end/error of the top-level run → final output (the last message's text, or a text output),
  stop reason (the last model response's finish reason, ``error`` on an error) and, on an error,
  outcome ``failure`` with the exception; a run that ends is not judged (outcome ``unknown``).

``input.requestPayload`` is ``{"inputs": <the run's inputs>, "langgraph": [<steps>]}``: each
LangGraph step (``metadata["langgraph_step"]`` and ``["langgraph_node"]``) in the order it started,
with what ran in it — ``{"kind": "retriever", "name", "memory": [{"entryId", "metadata"}]}`` (the
documents' full metadata), ``{"kind": "tool", "name", "toolCall": <sequence>, "toolCallId"}`` and
``{"kind": "chat_model", "name", "modelCall": <n>}`` (the n-th model call of the decision). The
capture schema has no field of its own for a graph's steps, and the request payload is content
signed like every other part.

The decision is the current decision from the top-level run's start to its end, so a
``wrap()``-ed ``openai`` / ``anthropic`` client underneath attaches its exact bytes and the capture
becomes fidelity ``wire`` (configuration, context, tool calls and output then come from the bytes;
memory entries and the request payload stay as above). How that holds across LangChain's threads
and tasks: :mod:`.handler`.

Nothing here raises into the agent: a callback that fails is named as a problem of its decision
(reported through the recorder's ``on_error`` and counted in ``stats.unrecordable``), or, when no
decision could be started, reported as a lost capture. Needs ``pip install
'agent-blackbox[langchain]'``.
"""

from __future__ import annotations

try:
    import langchain_core.callbacks  # noqa: F401  (the SDK check: name the extra when it is missing)
except ImportError as exc:
    raise ImportError(
        "blackbox's langchain integration needs langchain-core: pip install 'agent-blackbox[langchain]'"
    ) from exc

from producers.integrations.langchain.handler import BlackboxCallbackHandler
from producers.integrations.langchain.run import PROVENANCE_KEYS, SAMPLING_KEYS

__all__ = ["PROVENANCE_KEYS", "SAMPLING_KEYS", "BlackboxCallbackHandler"]
