"""Hooks through which the teams app tells the apps above it (workspaces) what happened,
without importing them: imports point down only (../shared/DESIGN.md; the import-linter
contracts in pyproject.toml). An app above registers once, in its ``AppConfig.ready()``;
registering a callback twice keeps one.

Decision callbacks are called by teams.quota_requests when a quota request is approved, rejected
or expires, inside the transaction that records the decision and before the requester is
told, as ``callback(workspace_id=..., decision=..., actor=..., reason=..., now=...)``
(``decision``: a teams.models.Decision value; ``actor`` None for an expiry). What they write
commits or rolls back with the decision; an exception raised by one reaches the caller.
"""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured

DecisionCallback = Callable[..., None]

_decision_callbacks: list[DecisionCallback] = []


def on_request_decided(callback: DecisionCallback) -> DecisionCallback:
    """Register ``callback`` to hear of every decided quota request; returns it."""
    if callback not in _decision_callbacks:
        _decision_callbacks.append(callback)
    return callback


def request_decided(
    *, workspace_id, decision: str, actor, reason: str, now: datetime, resize_to: str = ""
) -> None:
    """Call every registered decision callback (see the module's docstring); ``resize_to`` is
    the target of a resize request, "" for a workspace request."""
    for callback in _decision_callbacks:
        callback(
            workspace_id=workspace_id, decision=decision, actor=actor, reason=reason, now=now,
            resize_to=resize_to,
        )  # fmt: skip


# Identity callbacks: called once a user's own Entra ID identity (object id, UPN) changed and
# committed, as ``callback(user=...)``; e.g. workspaces brings the user's MIG slices' RoleBindings
# up to date.
_identity_callbacks: list[Callable[..., None]] = []


def on_identity_changed(callback: Callable[..., None]) -> Callable[..., None]:
    """Register ``callback`` to hear of every committed change of a user's Entra ID identity;
    returns it."""
    if callback not in _identity_callbacks:
        _identity_callbacks.append(callback)
    return callback


def identity_changed(*, user) -> None:
    """Call every registered identity callback (after the change committed)."""
    for callback in _identity_callbacks:
        callback(user=user)


# Account-merge callbacks: called inside the transaction that merges a local account into its
# Entra ID account (teams.account_merge), as ``callback(local=..., entra=...)``, each returning
# {what: how many moved} for the audit row; e.g. workspaces hands the local account's
# workspaces to the Entra ID one. An exception rolls the merge back.
_merge_callbacks: list[Callable[..., dict[str, int]]] = []


def on_account_merged(callback: Callable[..., dict[str, int]]) -> Callable[..., dict[str, int]]:
    """Register ``callback`` to move what the apps above own of a merged account; returns it."""
    if callback not in _merge_callbacks:
        _merge_callbacks.append(callback)
    return callback


def account_merged(*, local, entra) -> dict[str, int]:
    """Call every registered merge callback; their counts, together."""
    moved: dict[str, int] = {}
    for callback in _merge_callbacks:
        moved.update(callback(local=local, entra=entra))
    return moved


# What the team pages show of each team (members, GPUs in use, the month's spend and burn
# rate): figures of the apps above, put together by billing (billing.team_selectors), which
# provides them in its AppConfig.ready().
_overview: dict[str, Callable[..., Any]] = {}


def provide_team_overview(*, page: Callable[..., Any], one: Callable[..., Any]) -> None:
    """Register the team overview: ``page(user=, params=, now=)`` -> the team list's filtered,
    sorted page of rows; ``one(user=, team=, now=)`` -> the row of one team."""
    _overview.update(page=page, one=one)


def team_overview_page(*, user, params, now: datetime) -> Any:
    """The team list's page of overview rows, as provide_team_overview says. Raises
    ImproperlyConfigured when no app provided it."""
    return _provided_overview("page")(user=user, params=params, now=now)


def team_overview_one(*, user, team, now: datetime) -> Any:
    """One team's overview row, as provide_team_overview says. Raises ImproperlyConfigured
    when no app provided it."""
    return _provided_overview("one")(user=user, team=team, now=now)


def _provided_overview(name: str) -> Callable[..., Any]:
    try:
        return _overview[name]
    except KeyError:
        raise ImproperlyConfigured(
            "No app provides the team overview (billing registers it in BillingConfig.ready())."
        ) from None
