"""Hooks through which the workspaces app tells the apps above it (billing) what happened, and
asks them what only they know (a team's spend, a Spot price), without importing them: imports
point down only (../shared/DESIGN.md; the import-linter contracts in pyproject.toml). An app
above registers once, in its ``AppConfig.ready()``; registering a callback twice keeps one.

Transition callbacks are called by workspaces.states.transition inside the transaction that
changed the status, after its WorkspaceEvent is written, in registration order, as
``callback(workspace_id=..., expected=..., to=..., now=...)``: what they write commits or
rolls back with the status. An exception raised by one rolls the transition back and reaches
transition's caller.
"""

from collections.abc import Callable
from datetime import datetime

from django.core.exceptions import ImproperlyConfigured

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


# What the workspaces app asks of billing: a request is measured against the team's monthly
# budget, a Spot VM's size is offered at Azure's Spot price, and a workspace's page shows what
# it has cost. Billing provides both in its
# AppConfig.ready() (provide_spend); without billing installed there is nothing to ask.
_spend: dict[str, Callable] = {}


def provide_spend(*, team_spend: Callable, spot_price: Callable, workspace_cost: Callable) -> None:
    """Register billing's answers: ``team_spend(team_ids=, now=)`` -> {team_id: an object
    with ``spent`` (USD this month) and ``burn_per_hour`` (USD/hour)}, every team present;
    ``spot_price(now=)`` -> a query expression, for SizeOffering rows, of the Spot price
    (USD/hour, Decimal or None) of the row's vm_size and region in effect at ``now``;
    ``workspace_cost(workspace=, now=)`` -> what the workspace's page shows it has cost (an
    object with ``total``, ``month``, ``per_hour`` and ``disk_per_hour``, USD)."""
    _spend.update(team_spend=team_spend, spot_price=spot_price, workspace_cost=workspace_cost)


def team_spend(*, team_ids, now: datetime) -> dict:
    """Each team's month-to-date spend and burn rate, as provide_spend says. Raises
    ImproperlyConfigured when no app provided them."""
    return _provided("team_spend")(team_ids=team_ids, now=now)


def spot_price(*, now: datetime):
    """The Spot price expression for SizeOffering rows, as provide_spend says. Raises
    ImproperlyConfigured when no app provided it."""
    return _provided("spot_price")(now=now)


def workspace_cost(*, workspace, now: datetime):
    """What the workspace has cost, as provide_spend says. Raises ImproperlyConfigured when
    no app provided it."""
    return _provided("workspace_cost")(workspace=workspace, now=now)


def _provided(name: str) -> Callable:
    try:
        return _spend[name]
    except KeyError:
        raise ImproperlyConfigured(
            f"No app provides {name} (billing registers it in BillingConfig.ready())."
        ) from None


# What a workspace's page shows of right-sizing (billing.recommendations): billing provides it
# in its AppConfig.ready(); without billing the page shows no panel.
_recommendation: list[Callable] = []


def provide_recommendation(callback: Callable) -> None:
    """Register billing's ``callback(workspace=)`` -> the workspace's right-sizing panel (an
    object, or None when it has none yet)."""
    _recommendation[:] = [callback]


def workspace_recommendation(*, workspace):
    """The workspace's right-sizing panel as provide_recommendation says; None when no app
    provides one."""
    return _recommendation[0](workspace=workspace) if _recommendation else None
