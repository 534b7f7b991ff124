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
"""
