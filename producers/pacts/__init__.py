"""Pacts where both sides need them: the rule language, the pact document, the signed version, and
the runtime's use of its ``consequential_when`` rules (DESIGN decisions 17 and 26).

An agent runtime installs ``producers/`` alone, so what the Recorder needs to judge a decision by its
pact lives here, and the services (``consumers.pacts``) build on the same modules:

- :mod:`~producers.pacts.view` — the ``decision`` variable rules read (its fields are listed there)
- :mod:`~producers.pacts.expression` — compile and check a CEL rule, run it on one view (the CEL
  engine is the optional ``agent-blackbox[pacts]`` extra)
- :mod:`~producers.pacts.book` — the pact document: ``[pact.NAME]``, ``[consequential_when.NAME]``,
  ``agents``; refused whole if one rule does not compile
- :mod:`~producers.pacts.signed` — a pact version as a signed document: its id, its verification
- :mod:`~producers.pacts.source` — the version a runtime judges by, read from a file or URL off the
  agent's thread
- :mod:`~producers.pacts.judge` — one decision judged by the ``consequential_when`` rules
"""
