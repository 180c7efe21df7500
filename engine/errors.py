"""The exceptions loopstate raises. Control signals (a run waiting for approval) are not errors.

LoopstateError
├── DefinitionError        a tool, agent or machine is declared wrongly
├── ModelError             the model port failed (network, provider, bad reply)
│   └── ScriptExhausted    a ScriptedModel was asked for more turns than it has
│   └── UnexpectedRequest  a ScriptedModel's expectation did not hold
├── DecisionError          a decision was refused; the run is unchanged
├── RunNotFound            no run with that id in the store
├── RunBusy                another process holds the run's lease
├── RunNotResumable        the run is finished, or not waiting for what was given
├── StoreError             a stored row is corrupt or from a newer schema, or the store's
│                          file is damaged or held locked too long by another process
└── CassetteError          a cassette is unreadable, malformed, or from a newer loopstate
"""

from __future__ import annotations


class LoopstateError(Exception):
    """Root of every error loopstate raises on purpose."""


class DefinitionError(LoopstateError):
    pass


class ModelError(LoopstateError):
    pass


class ScriptExhausted(ModelError):
    pass


class UnexpectedRequest(ModelError):
    pass


class DecisionError(LoopstateError):
    pass


class RunNotFound(LoopstateError):
    pass


class RunBusy(LoopstateError):
    pass


class RunNotResumable(LoopstateError):
    pass


class StoreError(LoopstateError):
    pass


class CassetteError(LoopstateError):
    """A cassette file is missing, unreadable, malformed, or from a newer loopstate."""
