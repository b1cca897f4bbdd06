"""Hooks through which the teams app tells the apps above it (workspaces) what happened, and
asks billing for the team overview its pages show, without importing them: imports point down
only (../shared/DESIGN.md; the import-linter contracts in pyproject.toml). An app above
registers once, in its ``AppConfig.ready()``; registering a callback twice keeps one.

Every hook is a Protocol: mypy checks the registered function against it at the registration
call (workspaces/apps.py and billing/apps.py are in mypy's files), so a changed signature fails
``make lint``, not a request at run time.

Decision callbacks are called by teams.quota_requests when a quota request is approved, rejected
or expires, inside the transaction that records the decision and before the requester is
told, as ``callback(workspace_id=..., decision=..., actor=..., reason=..., now=...,
resize_to=...)`` (``decision``: a teams.models.Decision value; ``actor`` None for an expiry).
What they write commits or rolls back with the decision; an exception raised by one reaches
the caller.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

from django.contrib.auth.models import User
from django.db import models, transaction

from common.hooks import Callbacks, Provided

if TYPE_CHECKING:
    from common.permissions import Actor
    from teams.models import Team


class DecisionCallback(Protocol):
    """Told of a decided quota request (see the module's docstring); ``resize_to`` is the
    target of a resize request, "" for a workspace request."""

    def __call__(
        self,
        *,
        workspace_id: uuid.UUID | str,
        decision: str,
        actor: User | None,
        reason: str,
        now: datetime,
        resize_to: str = "",
    ) -> None: ...


_decision_callbacks: Callbacks[DecisionCallback] = Callbacks()


# Register a callback to hear of every decided quota request; returns it.
on_request_decided = _decision_callbacks.register


def request_decided(
    *,
    workspace_id: uuid.UUID | str,
    decision: str,
    actor: User | None,
    reason: str,
    now: datetime,
    resize_to: str = "",
) -> None:
    """Call every registered decision callback (see the module's docstring)."""
    for callback in _decision_callbacks.callbacks:
        callback(
            workspace_id=workspace_id, decision=decision, actor=actor, reason=reason, now=now,
            resize_to=resize_to,
        )  # fmt: skip


class IdentityCallback(Protocol):
    """Told once a user's own Entra ID identity (object id, UPN) changed and committed; e.g.
    workspaces brings the user's MIG slices' RoleBindings up to date. Its result is unused."""

    def __call__(self, *, user: User) -> object: ...


_identity_callbacks: Callbacks[IdentityCallback] = Callbacks()


# Register a callback to hear of every committed change of a user's Entra ID identity;
# returns it.
on_identity_changed = _identity_callbacks.register


def identity_changed(*, user: User) -> None:
    """Call every registered identity callback (after the change committed)."""
    for callback in _identity_callbacks.callbacks:
        callback(user=user)


class LeaveReason(models.TextChoices):
    REMOVED_BY_ADMIN = "removed_by_admin", "removed from the team by a team admin"
    REMOVED_BY_ENTRA = "removed_by_entra", "no longer in the team's Entra ID group"
    DEACTIVATED_BY_ENTRA = "deactivated_by_entra", "disabled or deleted in Entra ID"


class MemberLeftCallback(Protocol):
    """Told once a user stopped being a member of ``team`` (or stays one but was deactivated)
    and the change committed (never for one rolled back): ``reason`` a LeaveReason value,
    ``now`` the aware UTC time of the change. workspaces.leavers applies the team's leaver
    policy to the user's workspaces in that team."""

    def __call__(self, *, team: Team, user: User, reason: str, now: datetime) -> None: ...


_member_left_callbacks: Callbacks[MemberLeftCallback] = Callbacks()
log = logging.getLogger(__name__)


# Register a callback to hear of every member who left a team; returns it.
on_member_left = _member_left_callbacks.register


def member_left_announce(*, team: Team, user: User, reason: str, now: datetime) -> None:
    """Tell every member-left callback of (team, user) once the caller's transaction
    commits."""
    transaction.on_commit(lambda: _member_left(team, user, reason, now))


def _member_left(team: Team, user: User, reason: str, now: datetime) -> None:
    # A callback's failure must not undo or hide the others': the leave itself is done.
    for callback in _member_left_callbacks.callbacks:
        try:
            callback(team=team, user=user, reason=reason, now=now)
        except Exception:
            log.exception(
                "member_left callback %s failed for user %s in team %s",
                getattr(callback, "__qualname__", callback),
                user.pk,
                team.pk,
            )


class MergeCallback(Protocol):
    """Called inside the transaction that merges a local account into its Entra ID account
    (teams.account_merge); returns {what: how many moved} for the audit row; e.g. workspaces
    hands the local account's workspaces to the Entra ID one. An exception rolls the merge
    back."""

    def __call__(self, *, local: User, entra: User) -> dict[str, int]: ...


_merge_callbacks: Callbacks[MergeCallback] = Callbacks()


# Register a callback to move what the apps above own of a merged account; returns it.
on_account_merged = _merge_callbacks.register


def account_merged(*, local: User, entra: User) -> dict[str, int]:
    """Call every registered merge callback; their counts, together."""
    moved: dict[str, int] = {}
    for callback in _merge_callbacks.callbacks:
        moved.update(callback(local=local, entra=entra))
    return moved


# What a team's pages show of it (members, GPUs in use, the month's spend and burn rate):
# figures of the apps above, put together by billing (billing.team_selectors), which provides
# them in its AppConfig.ready(). The team list is billing's own page (billing.team_views).


class TeamOverviewRow(Protocol):
    """One team's row (templates/teams/detail.html, quota.html): the team, its quota
    lines, members, pending increases and burn rate (USD/hour)."""

    @property
    def team(self) -> Team: ...
    @property
    def lines(self) -> Sequence[Any]: ...  # the templates read each line's fields
    @property
    def members(self) -> int: ...
    @property
    def pending_increases(self) -> int: ...
    @property
    def spend_per_hour(self) -> Decimal: ...


class TeamOverviewOne(Protocol):
    """The row of one team; raises Team.DoesNotExist when ``user`` may not see it."""

    def __call__(self, *, user: Actor, team: Team, now: datetime) -> TeamOverviewRow: ...


_overview_one: Provided[TeamOverviewOne] = Provided(
    "the team overview (billing registers it in BillingConfig.ready())"
)


def provide_team_overview(*, one: TeamOverviewOne) -> None:
    """Register the team overview's row of one team (TeamOverviewOne)."""
    _overview_one.provide(one)


def team_overview_one(*, user: Actor, team: Team, now: datetime) -> TeamOverviewRow:
    """One team's overview row. Raises ImproperlyConfigured when no app provided it."""
    return _overview_one.get()(user=user, team=team, now=now)
