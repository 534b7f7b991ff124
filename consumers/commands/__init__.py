"""CLI command modules; each exposes ``register(app)`` and is listed in ``consumers.cli``."""
