"""Capture adapters: one module per stack an agent already runs on.

Each adapter turns what a stack sends and receives into evidence without changing the agent's
code or its traffic. The provider wire formats they read live in :mod:`producers.wire`.

- :mod:`producers.integrations.http_capture` — the HTTP layer under the ``openai`` and
  ``anthropic`` SDKs: an ``httpx2`` transport wrapper that records every model call's exact bytes.
- :mod:`producers.integrations.openai` / :mod:`producers.integrations.anthropic` — ``wrap(client,
  recorder)``: an SDK client whose model calls become wire-fidelity captures (extras
  ``agent-blackbox[openai]`` / ``[anthropic]``).
- :mod:`producers.integrations.recording` — routes each call to the current decision, or to a
  decision of its own; :mod:`producers.integrations.assemble` turns the calls into capture fields
  on the recorder's worker.
- :mod:`producers.integrations.otel` — ``BlackboxSpanExporter(recorder)``: OpenTelemetry GenAI
  spans (``gen_ai.*`` and OpenInference ``llm.*``) into semantic-fidelity captures (extra
  ``agent-blackbox[otel]``), on :mod:`producers.integrations.genai_spans`, the pure span → decision
  mapping the OTLP receiver (``blackbox otlp``) shares.
- :mod:`producers.integrations.langchain` — ``BlackboxCallbackHandler(recorder)``: one semantic
  decision per LangChain / LangGraph top-level run, wire when a wrapped client runs underneath
  (extra ``agent-blackbox[langchain]``).
"""
