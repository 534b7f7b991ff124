"""The wire room: what blackbox knows about model providers' wire formats, one module per format.

Pure format knowledge — request bodies, response shapes, finish reasons, tool calls — shared by
the capture adapters (``producers/integrations/``) and by replay (``consumers/replay/``), so both
read and write a provider's messages the same way. No HTTP client, no settings, nothing beyond
the SDK's own dependencies: the client that sends these bodies lives with replay.

- :mod:`producers.wire.openai_chat` — OpenAI Chat Completions (also spoken by vLLM, llama.cpp,
  Ollama and most hosted APIs).
- :mod:`producers.wire.openai_responses` — OpenAI Responses.
- :mod:`producers.wire.anthropic_messages` — Anthropic Messages.
- :mod:`producers.wire.calls` — the provider-neutral view of one captured call (request, response,
  tool uses and results) the three format modules read into; :mod:`producers.wire.sse` reads a
  recorded server-sent-event stream.
- :mod:`producers.wire.formats` — the formats by name, with what sending a recorded body again
  needs (path, history member, headers, how the key travels); :mod:`producers.wire.body` edits one
  member or span of a recorded body and leaves every other byte as it was.
"""
