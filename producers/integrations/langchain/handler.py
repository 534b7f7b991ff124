"""The LangChain callback handler: which run belongs to which decision, on whatever thread.

Every top-level run (no parent, or a parent this handler never saw) opens a decision with fidelity
``semantic`` and makes it the *current decision* (:func:`producers.decision.current_decision`)
until the run ends; every later run is filed under its top-level run by its parent id.

Why the handler runs inline (``run_inline = True``): LangChain then calls it on the caller's thread
(sync runs) or awaits it in the caller's task (async runs), so the context variable it sets at the
top-level run's start is inherited by everything the run does — LangGraph copies the context into
the executor threads and tasks that run nodes, tools and models — and a ``wrap()``-ed ``openai`` /
``anthropic`` client making the model's HTTP call finds the decision. A handler that is not inline
runs in a thread pool (a sync handler in an async run) or in its own task (``asyncio.gather``),
where the variable it sets reaches nothing. Callbacks of one run still come from several threads
(parallel nodes and tools), so the state is behind one lock, held only to file references; the
decision is written when the top-level run ends (:func:`.run.record_decision`).

Nothing raises into the agent: a callback that fails becomes a problem of its decision (the
recorder's ``on_error``, ``stats.unrecordable``), or a lost capture when no decision could be
opened (``on_error``, ``stats.failed``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, convert_to_openai_messages

from producers.integrations.langchain.run import (
    RunRecord,
    ToolRun,
    configuration,
    describe,
    jsonable,
    memory_entry,
    model_response,
    record_decision,
    run_name,
)
from producers.pipeline import as_blackbox

if TYPE_CHECKING:
    from producers.recorder import Recorder

__all__ = ["BlackboxCallbackHandler"]


class BlackboxCallbackHandler(BaseCallbackHandler):
    """A LangChain callback handler recording one decision per top-level run (module docstring)."""

    run_inline = True  # the decision must be current in the caller's context: see the module doc
    raise_error = False

    def __init__(self, recorder: Recorder, *, consequential: bool = False) -> None:
        self._recorder = recorder
        self._consequential = consequential
        self._lock = threading.Lock()
        self._roots: dict[UUID, RunRecord] = {}
        self._owner: dict[UUID, UUID] = {}  # run id -> its top-level run id

    # --- run bookkeeping ------------------------------------------------------------------------
    def _start(self, run_id: UUID, parent_run_id: UUID | None, inputs: Any) -> RunRecord | None:
        """The root this run belongs to, opening a decision when the run is top-level for us."""
        with self._lock:
            root_id = None if parent_run_id is None else self._owner.get(parent_run_id)
            if root_id is not None:
                self._owner[run_id] = root_id
                root = self._roots[root_id]
                root.runs.add(run_id)
                return root
        given = jsonable(inputs)  # as given now: LangGraph adds ids to the input messages later
        try:
            decision = self._recorder.decision(consequential=self._consequential, fidelity="semantic")
            decision.__enter__()  # the current decision until the run ends (see the module doc)
        except Exception as exc:
            self._recorder._lost("capture", None, as_blackbox(exc))
            return None
        root = RunRecord(decision=decision, inputs=given, runs={run_id})
        with self._lock:
            self._roots[run_id] = root
            self._owner[run_id] = run_id
        return root

    def _root(self, run_id: UUID) -> RunRecord | None:
        with self._lock:
            root_id = self._owner.get(run_id)
            return None if root_id is None else self._roots.get(root_id)

    def _step(
        self, root: RunRecord, metadata: Mapping[str, Any] | None, entry: dict[str, Any] | None
    ) -> None:
        """Note the LangGraph step the run belongs to (and what ran in it); under the lock."""
        if not metadata or "langgraph_step" not in metadata:
            return
        step, node = metadata.get("langgraph_step"), metadata.get("langgraph_node")
        if type(step) is not int or not isinstance(node, str):
            return
        runs = root.steps.setdefault((step, node), [])
        if entry is not None:
            runs.append(entry)

    def _guard(self, what: str, run_id: UUID, exc: Exception) -> None:
        root = self._root(run_id)
        if root is None:
            self._recorder._lost("capture", None, as_blackbox(exc))
            return
        with self._lock:
            root.problems.append((f"langchain {what}", exc))

    # --- chains (a LangGraph graph and its nodes are chains) -----------------------------------
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            root = self._start(run_id, parent_run_id, inputs)
            if root is not None:
                with self._lock:
                    self._step(root, metadata, None)
        except Exception as exc:
            self._guard("on_chain_start", run_id, exc)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=outputs, error=None)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=None, error=error)

    # --- model calls ----------------------------------------------------------------------------
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            root = self._start(run_id, parent_run_id, {"messages": messages[0] if messages else []})
            if root is None:
                return
            rendered = convert_to_openai_messages(messages[0]) if messages else []
            self._model_start(root, serialized, metadata, kwargs, rendered)
        except Exception as exc:
            self._guard("on_chat_model_start", run_id, exc)

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # A text-completion model: its configuration, but no chat rendering to state.
        try:
            root = self._start(run_id, parent_run_id, {"prompts": list(prompts)})
            if root is not None:
                self._model_start(root, serialized, metadata, kwargs, None)
        except Exception as exc:
            self._guard("on_llm_start", run_id, exc)

    def _model_start(
        self,
        root: RunRecord,
        serialized: Mapping[str, Any] | None,
        metadata: Mapping[str, Any] | None,
        kwargs: Mapping[str, Any],
        rendered: list[dict[str, Any]] | None,
    ) -> None:
        params = kwargs.get("invocation_params") or {}
        name = run_name(serialized, kwargs)
        with self._lock:
            root.model_calls += 1
            self._step(root, metadata, {"kind": "chat_model", "name": name, "modelCall": root.model_calls})
            if root.config is not None:
                return
            root.config = configuration(params, metadata or {}, rendered, name=name)
            root.messages = rendered

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        try:
            root = self._root(run_id)
            if root is not None:
                text, stop, version = model_response(response)
                with self._lock:
                    root.last_text, root.last_stop = text, stop
                    if root.config is not None and "model_version" not in root.config:
                        root.config["model_version"] = version
        except Exception as exc:
            self._guard("on_llm_end", run_id, exc)
        self._end(run_id, output=None, error=None)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=None, error=error)

    # --- retrievers -----------------------------------------------------------------------------
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            root = self._start(run_id, parent_run_id, {"query": query})
            if root is not None:
                name = (metadata or {}).get("ls_retriever_name") or run_name(serialized, kwargs)
                entry: dict[str, Any] = {"kind": "retriever", "name": name, "memory": []}
                with self._lock:
                    self._step(root, metadata, entry)
                    root.retrievals[run_id] = entry
        except Exception as exc:
            self._guard("on_retriever_start", run_id, exc)

    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        try:
            root = self._root(run_id)
            if root is not None:
                with self._lock:
                    found = root.retrievals.pop(run_id, None) or {"name": None, "memory": []}
                entries = [memory_entry(document, method=found["name"]) for document in documents]
                listed = [
                    {"entryId": entry["entry_id"], "metadata": jsonable(getattr(document, "metadata", None))}
                    for entry, document in zip(entries, documents, strict=True)
                ]
                with self._lock:
                    root.memory.extend(entries)
                    found["memory"].extend(listed)
        except Exception as exc:
            self._guard("on_retriever_end", run_id, exc)
        self._end(run_id, output=None, error=None)

    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._end(run_id, output=None, error=error)

    # --- tools ----------------------------------------------------------------------------------
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            given = input_str if inputs is None else inputs
            root = self._start(run_id, parent_run_id, given)
            if root is None:
                return
            name = run_name(serialized, kwargs)
            recorded = jsonable(given)
            moment = time.perf_counter()
            with self._lock:
                tool = ToolRun(len(root.tools) + 1, name, recorded, moment)
                root.tools[run_id] = tool
                entry = {"kind": "tool", "name": name, "toolCall": tool.sequence}
                if isinstance(kwargs.get("tool_call_id"), str):
                    entry["toolCallId"] = kwargs["tool_call_id"]
                self._step(root, metadata, entry)
        except Exception as exc:
            self._guard("on_tool_start", run_id, exc)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id, output=output, error=None)
        self._end(run_id, output=None, error=None)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id, output=None, error=error)
        self._end(run_id, output=None, error=error)

    def _tool_done(self, run_id: UUID, *, output: Any, error: BaseException | None) -> None:
        try:
            root = self._root(run_id)
            if root is None:
                return
            moment = time.perf_counter()
            given = jsonable(output.content if isinstance(output, BaseMessage) else output)
            with self._lock:
                tool = root.tools.get(run_id)
                if tool is not None:
                    tool.output, tool.ended = given, moment
                    tool.error = None if error is None else describe(error)
        except Exception as exc:
            self._guard("tool end", run_id, exc)

    # --- the end of a run -----------------------------------------------------------------------
    def _end(self, run_id: UUID, *, output: Any, error: BaseException | None) -> None:
        """Forget a run; when it is a top-level run, finish its decision."""
        try:
            with self._lock:
                root = self._roots.pop(run_id, None)
                if root is None:
                    return
                for member in root.runs:
                    self._owner.pop(member, None)
                # a straggler on another thread may still hold the record: write from a copy
                ended = replace(
                    root,
                    steps={key: list(runs) for key, runs in root.steps.items()},
                    memory=list(root.memory),
                    tools=dict(root.tools),
                    problems=list(root.problems),
                )
            record_decision(ended, output=output, error=error)
        except Exception as exc:  # the decision could not be finished: it is lost, say so
            self._recorder._lost("capture", None, as_blackbox(exc))
