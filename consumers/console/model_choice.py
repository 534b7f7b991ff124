"""The model endpoints a console job may replay against, chosen by name: the operator's allow-list
(keys read on the server, never shown) and the demo's in-process scripted model."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.console.core import Console
    from consumers.replay.clients import ModelClient

__all__ = ["DEMO_MODEL", "ModelChoice", "model_choices"]

_ENTRY_NAME = re.compile(r"allow-list entry '([^']*)'")
DEMO_MODEL = "demo-scripted"


@dataclass(frozen=True, slots=True)
class ModelChoice:
    name: str
    described: str
    """What the page shows: the kind of endpoint, never its key."""
    build: Callable[[], tuple[ModelClient, Callable[[], None]]]
    """A client and what closes it, built in the job's thread."""


def model_choices(console: Console) -> dict[str, ModelChoice]:
    """The allow-list's named endpoints, then the demo's in-process scripted model."""
    from consumers.replay.clients import CallableModelClient, OpenAICompatibleClient
    from consumers.replay.endpoints import EndpointPolicy, load_allow_list

    settings = console.rt.settings
    choices: dict[str, ModelChoice] = {}
    for entry in load_allow_list(settings.resolved_model_endpoints):
        named = _ENTRY_NAME.match(entry.source)
        name = named.group(1) if named else entry.url

        def build(entry: Any = entry) -> tuple[ModelClient, Callable[[], None]]:
            policy = EndpointPolicy(operator=entry, allowed=(entry,))
            client = OpenAICompatibleClient(policy=policy)
            return client, client.close

        choices[name] = ModelChoice(name=name, described=f"allow-listed endpoint {entry.url}", build=build)

    def demo() -> tuple[ModelClient, Callable[[], None]]:
        from consumers.demo.model import ScriptedSupportModel

        return CallableModelClient(ScriptedSupportModel(), name=DEMO_MODEL), lambda: None

    choices[DEMO_MODEL] = ModelChoice(
        name=DEMO_MODEL,
        described="the demo's scripted support model, in this process (dials nothing)",
        build=demo,
    )
    return choices
