"""The interop tests' fixtures (interop_world.py holds them and the helpers)."""

from interop_world import blackbox_env, serve

__all__ = ["blackbox_env", "serve"]
