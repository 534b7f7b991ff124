"""Pacts: behavioural commitments written in CEL over a decision's structured data (DESIGN decision 17).

A pact file (``BLACKBOX_PACTS``, default ``<data_dir>/pacts.toml``) names rules that must hold on
every decision; ingest evaluates them on every verified capture. A violation flags the decision
(consequential + failure, reason ``pact violated: RULE``: it is kept ``retentionDays`` and
``failed_any`` counts it) and writes a ``pact_violations`` row; a rule that errors on one decision is
recorded as an ``error`` row and counted, and ingest goes on. The ``pact_violations`` trend shows the
incidence per rule per day. Replay and regress call :func:`evaluate` on replayed outputs.

Module map (one concept each). The rule language, the pact document and the signed version's format
live in :mod:`producers.pacts`, because an agent's runtime evaluates ``consequential_when`` rules too
and installs ``producers/`` alone:

- :mod:`~producers.pacts.view` — the ``decision`` variable rules read (its fields are listed there)
- :mod:`~producers.pacts.expression` — compile and check a CEL rule, run it on one view
- :mod:`~producers.pacts.book` — the pact file: load, validate, refuse a rule that does not compile
- :mod:`~producers.pacts.signed` — a version as a signed document: its id, its verification
- :mod:`~consumers.pacts.evaluate` — every pact on one decision: violations and evaluation errors
- :mod:`~consumers.pacts.store` — the SQL: ``pact_violations`` rows and the failure flag of a violation
- :mod:`~consumers.pacts.versions` — pact sets as signed versions in the blob store, the applied pointer
- :mod:`~consumers.pacts.applied` — the applied version ingest judges by, re-read when it changes
- :mod:`~consumers.pacts.gate` — what a new version would flag or clear before it is applied
- :mod:`~consumers.pacts.record` — an agent's behavioural record and its score
"""

from consumers.pacts.evaluate import Evaluation, RuleResult, evaluate, evaluate_capture
from producers.pacts.book import NAME, PactBook, load_pacts, parse_pacts
from producers.pacts.expression import PactInvalid, Rule, RuleError, check_rule, run_rule
from producers.pacts.view import decision_view

__all__ = [
    "NAME",
    "Evaluation",
    "PactBook",
    "PactInvalid",
    "Rule",
    "RuleError",
    "RuleResult",
    "check_rule",
    "decision_view",
    "evaluate",
    "evaluate_capture",
    "load_pacts",
    "parse_pacts",
    "run_rule",
]
