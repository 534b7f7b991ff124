"""The wheel and the sdist, built once per session, and the virtual environments that install them."""

from distributions import base_venv, built, server_venv

__all__ = ["base_venv", "built", "server_venv"]
