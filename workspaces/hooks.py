"""Hooks through which the workspaces app tells the apps above it (billing) what happened,
without importing them: imports point down only (docs: ../shared/DESIGN.md, the import-linter
contracts in pyproject.toml). An app above registers its callbacks once, in its
``AppConfig.ready()``; registering the same callback twice keeps one.

Transition callbacks are called by workspaces.states.transition inside the transaction that
changed the status, after its WorkspaceEvent is written, in registration order, as
``callback(workspace_id=..., expected=..., to=..., now=...)``: what they write commits or
rolls back with the status. An exception raised by one rolls the transition back and reaches
transition's caller.
"""

from collections.abc import Callable
from datetime import datetime

TransitionCallback = Callable[..., None]

_transition_callbacks: list[TransitionCallback] = []


def on_transition(callback: TransitionCallback) -> TransitionCallback:
    """Register ``callback`` to hear of every status change; returns it (usable as a
    decorator)."""
    if callback not in _transition_callbacks:
        _transition_callbacks.append(callback)
    return callback


def transition_happened(*, workspace_id, expected: str, to: str, now: datetime) -> None:
    """Call every registered transition callback (see the module's docstring)."""
    for callback in _transition_callbacks:
        callback(workspace_id=workspace_id, expected=expected, to=to, now=now)
