"""Services and operator tools: ingest, index, retention, replay, access, the CLI."""
