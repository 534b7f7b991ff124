"""Replay: re-execute a captured decision in a sandbox, vary one variable, bisect, regress.

Load → access gate → verify → rebuild the exact request (hash-checked) → run the agent against
recorded tool answers and captured external state → compare with the capture. See
``consumers/replay/replayer.py`` for the flow and DESIGN decisions 10-13 for the rules. A wire
capture sends its recorded bytes instead of a rebuilt request (``wire_request``, ``wire_loop``,
``wire_variation``, ``wire_client``); every report states what the capture's fidelity lets it
prove (``fidelity``). Variables name what they change (``versions``, ``memory_variation``); a
probe sweeps one to map the failure boundary (``probe``); regress judges replayed outputs by the
pacts and a finding's rule (``checks``, ``regress``).
"""

from consumers.replay.agent_hook import AgentFunction, AgentRun, ReplayHandles, StepLimitReached, run_agent
from consumers.replay.bisect import BisectResult, ExplainResult, bisect_candidates, explain_change
from consumers.replay.checks import Check, CheckResult, checks_of, replayed_capture
from consumers.replay.clients import CallableModelClient, ModelClient, OpenAICompatibleClient
from consumers.replay.endpoints import EndpointNotAllowed, EndpointPolicy, InsecureEndpoint, ModelEndpoint
from consumers.replay.loop import tool_calling_loop
from consumers.replay.outcome import Comparison, Outcome, compare
from consumers.replay.probe import Judge, ProbeResult, parse_sweep, probe
from consumers.replay.regress import DecisionVerdict, RegressionResult, regress
from consumers.replay.replayer import (
    NoVariation,
    PreparedCapture,
    Replayer,
    ReplayResult,
    ReplayResults,
    UnverifiedCapture,
)
from consumers.replay.report import ReplayReport, build_report, render_table, replay_with_report, report_json
from consumers.replay.request import ContentAbsent, HashCheck, rebuild_request
from consumers.replay.runlog import IndexReplayRunLog, ListReplayRunLog, ReplayRunLog, ReplayRunRow
from consumers.replay.sandbox import HttpToolBackend, LiveTools, Sandbox, ToolBackend, ToolCall
from consumers.replay.source import CaptureSource, FileCaptureSource, IndexedCaptureSource
from consumers.replay.variance import Variance, characterize, distribution
from consumers.replay.variation import (
    InvalidVariation,
    Variation,
    apply_variation,
    load_configuration,
    parse_variation,
)
from consumers.replay.verification import EvidenceVerifier, Verifier
from consumers.replay.versions import (
    IndexVersionCatalog,
    StaticVersionCatalog,
    UnknownVersion,
    VersionCatalog,
)
from consumers.replay.wire_client import HttpWireClient, WireClient, WireReply
from consumers.replay.wire_request import WireCall, WireInputs
from schemas.errors import ModelNotFound

__all__ = [
    "AgentFunction",
    "AgentRun",
    "BisectResult",
    "CallableModelClient",
    "CaptureSource",
    "Check",
    "CheckResult",
    "Comparison",
    "ContentAbsent",
    "DecisionVerdict",
    "EndpointNotAllowed",
    "EndpointPolicy",
    "EvidenceVerifier",
    "ExplainResult",
    "FileCaptureSource",
    "HashCheck",
    "HttpToolBackend",
    "HttpWireClient",
    "IndexReplayRunLog",
    "IndexVersionCatalog",
    "IndexedCaptureSource",
    "InsecureEndpoint",
    "InvalidVariation",
    "Judge",
    "ListReplayRunLog",
    "LiveTools",
    "ModelClient",
    "ModelEndpoint",
    "ModelNotFound",
    "NoVariation",
    "OpenAICompatibleClient",
    "Outcome",
    "PreparedCapture",
    "ProbeResult",
    "RegressionResult",
    "ReplayHandles",
    "ReplayReport",
    "ReplayResult",
    "ReplayResults",
    "ReplayRunLog",
    "ReplayRunRow",
    "Replayer",
    "Sandbox",
    "StaticVersionCatalog",
    "StepLimitReached",
    "ToolBackend",
    "ToolCall",
    "UnknownVersion",
    "UnverifiedCapture",
    "Variance",
    "Variation",
    "Verifier",
    "VersionCatalog",
    "WireCall",
    "WireClient",
    "WireInputs",
    "WireReply",
    "apply_variation",
    "bisect_candidates",
    "build_report",
    "characterize",
    "checks_of",
    "compare",
    "distribution",
    "explain_change",
    "load_configuration",
    "parse_sweep",
    "parse_variation",
    "probe",
    "rebuild_request",
    "regress",
    "render_table",
    "replay_with_report",
    "replayed_capture",
    "report_json",
    "run_agent",
    "tool_calling_loop",
]
