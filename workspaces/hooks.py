"""Hooks through which the workspaces app tells the apps above it (billing) what happened, and
asks them what only they know (a team's spend, a Spot price), without importing them: imports
point down only (../shared/DESIGN.md; the import-linter contracts in pyproject.toml). An app
above registers once, in its ``AppConfig.ready()``; registering a callback twice keeps one.

Every hook is a Protocol: mypy checks the provider's function against it at the registration
call (billing/apps.py is in mypy's files), so a changed signature fails ``make lint``, not a
page at run time.

Transition callbacks are called by workspaces.states.transition inside the transaction that
changed the status, after its WorkspaceEvent is written, in registration order, as
``callback(workspace_id=..., expected=..., to=..., now=...)``: what they write commits or
rolls back with the status. An exception raised by one rolls the transition back and reaches
transition's caller.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

from common.hooks import Callbacks, Provided

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models import Expression, Subquery

    from teams.models import Team
    from workspaces.models import Workspace


class TransitionCallback(Protocol):
    """Told of a status change (see the module's docstring); ``expected`` and ``to`` are
    workspaces.states.Status values."""

    def __call__(
        self, *, workspace_id: uuid.UUID | str, expected: str, to: str, now: datetime
    ) -> None: ...


_transitions: Callbacks[TransitionCallback] = Callbacks()
# Register a callback to hear of every status change; returns it (usable as a decorator).
on_transition = _transitions.register


def transition_happened(
    *, workspace_id: uuid.UUID | str, expected: str, to: str, now: datetime
) -> None:
    """Call every registered transition callback (see the module's docstring)."""
    for callback in _transitions.callbacks:
        callback(workspace_id=workspace_id, expected=expected, to=to, now=now)


# What the workspaces app asks of billing: a request is measured against the team's monthly
# budget, a Spot VM's size is offered at Azure's Spot price, and a workspace's page shows what
# it has cost and its right-sizing panel. Billing provides them in its AppConfig.ready()
# (provide_spend, provide_recommendation); without billing there is nothing to ask.


class TeamSpendFigures(Protocol):
    """A team's month so far: ``spent`` USD since the 1st, ``burn_per_hour`` USD/hour."""

    @property
    def spent(self) -> Decimal: ...
    @property
    def burn_per_hour(self) -> Decimal: ...


class WorkspaceCostFigures(Protocol):
    """What a workspace's page shows it has cost (USD; per_hour and disk_per_hour USD/hour);
    ``delete_asked_at`` and ``since_delete`` while a delete is asked, else None."""

    @property
    def total(self) -> Decimal: ...
    @property
    def month(self) -> Decimal: ...
    @property
    def per_hour(self) -> Decimal: ...
    @property
    def disk_per_hour(self) -> Decimal: ...
    @property
    def delete_asked_at(self) -> datetime | None: ...
    @property
    def since_delete(self) -> Decimal | None: ...


class TeamSpend(Protocol):
    """{team_id: its figures}, every team of ``team_ids`` present."""

    def __call__(
        self, *, team_ids: Iterable[int], now: datetime
    ) -> Mapping[int, TeamSpendFigures]: ...


class SpotPrice(Protocol):
    """A query expression, for SizeOffering rows, of the Spot price (USD/hour, Decimal or
    None) of the row's vm_size and region in effect at ``now``."""

    def __call__(self, *, now: datetime) -> Subquery | Expression: ...


class WorkspaceCost(Protocol):
    def __call__(self, *, workspace: Workspace, now: datetime) -> WorkspaceCostFigures: ...


class Advice(Protocol):
    """What the workspace page reads of a right-sizing recommendation: the size it advises
    (``target``, "" for none) and that size's kind."""

    @property
    def target(self) -> str: ...
    @property
    def target_kind(self) -> str: ...


class RightsizingPanel(Protocol):
    """The workspace page's right-sizing panel (templates/workspaces/_rightsizing.html):
    its recommendation, None until one comes."""

    @property
    def recommendation(self) -> Advice | None: ...


class WorkspaceRecommendation(Protocol):
    def __call__(self, *, workspace: Workspace) -> RightsizingPanel: ...


@dataclass(frozen=True)
class _Spend:
    team_spend: TeamSpend
    spot_price: SpotPrice
    workspace_cost: WorkspaceCost


_spend: Provided[_Spend] = Provided("spend (billing registers it in BillingConfig.ready())")


def provide_spend(
    *, team_spend: TeamSpend, spot_price: SpotPrice, workspace_cost: WorkspaceCost
) -> None:
    """Register billing's answers (their Protocols say what each takes and returns)."""
    _spend.provide(_Spend(team_spend, spot_price, workspace_cost))


def _provided() -> _Spend:
    return _spend.get()


def team_spend(*, team_ids: Iterable[int], now: datetime) -> Mapping[int, TeamSpendFigures]:
    """Each team's month-to-date spend and burn rate (TeamSpend). Raises ImproperlyConfigured
    when no app provided it."""
    return _provided().team_spend(team_ids=team_ids, now=now)


def spot_price(*, now: datetime) -> Subquery | Expression:
    """The Spot price expression for SizeOffering rows (SpotPrice). Raises
    ImproperlyConfigured when no app provided it."""
    return _provided().spot_price(now=now)


def workspace_cost(*, workspace: Workspace, now: datetime) -> WorkspaceCostFigures:
    """What the workspace has cost (WorkspaceCost). Raises ImproperlyConfigured when no app
    provided it."""
    return _provided().workspace_cost(workspace=workspace, now=now)


_recommendation: Provided[WorkspaceRecommendation] = Provided("right-sizing panels")
# Register billing's right-sizing panel of a workspace.
provide_recommendation = _recommendation.provide


def workspace_recommendation(*, workspace: Workspace) -> RightsizingPanel | None:
    """The workspace's right-sizing panel; None when no app provides one."""
    panel = _recommendation.given
    return panel(workspace=workspace) if panel is not None else None


# What the workspaces app asks of storage (issue 33): the NFS shares a workspace mounts, its
# team's shares and its owner's home. Storage provides it in its AppConfig.ready(); without
# storage a workspace mounts nothing.


@dataclass(frozen=True)
class WorkspaceMount:
    """One NFS mount: ``source`` as mount(8) takes it ("<account>.file.core.windows.net:/
    <account>/<share>"), ``path`` in the workspace, ``label`` what users call it ("datasets",
    "home"); ``account`` and ``share`` name the Azure Files share (a pod's PersistentVolume)."""

    source: str
    path: str
    read_only: bool
    label: str
    account: str
    share: str
    size_gib: int = 100


@dataclass(frozen=True)
class MountChoice:
    """What a request asks to mount (Workspace.mount_shares, mount_home): ``shares`` the team
    shares by name, None for every share the owner's role may mount (the default); ``home``
    whether the owner's home is mounted at /data/home."""

    shares: tuple[str, ...] | None = None
    home: bool = True


# The default choice: every share the owner's role may mount, and the home.
ALL_MOUNTS = MountChoice()


class WorkspaceMounts(Protocol):
    """The mounts of a workspace, in the order they should be mounted."""

    def __call__(self, *, workspace: Workspace) -> list[WorkspaceMount]: ...


class MountOptions(Protocol):
    """The names of the team's shares ``user`` may mount now (ready, and their role's access
    is not "not mounted"), by name."""

    def __call__(self, *, team: Team, user: User) -> list[str]: ...


_mounts: Provided[WorkspaceMounts] = Provided("mounts (storage: StorageConfig.ready())")
_planned_mounts: Provided[WorkspaceMounts] = Provided("shown mounts (storage)")
_mount_options: Provided[MountOptions] = Provided("mount options (storage)")


def provide_mounts(
    callback: WorkspaceMounts, planned: WorkspaceMounts, options: MountOptions
) -> None:
    """Register storage's answer to which shares a workspace mounts: ``callback`` when its
    VM or pod is made (it may make the owner's home first), ``planned`` for a page (a read),
    ``options`` what a request may choose among."""
    _mounts.provide(callback)
    _planned_mounts.provide(planned)
    _mount_options.provide(options)


def mount_options(*, team: Team, user: User) -> list[str]:
    """The share names a request of ``user`` in ``team`` may choose (MountOptions); none
    when no app provides them."""
    given = _mount_options.given
    return given(team=team, user=user) if given is not None else []


def workspace_mounts(*, workspace: Workspace) -> list[WorkspaceMount]:
    """The workspace's NFS mounts, to make it with; none when no app provides them."""
    given = _mounts.given
    return given(workspace=workspace) if given is not None else []


def workspace_mounts_planned(*, workspace: Workspace) -> list[WorkspaceMount]:
    """What the workspace mounts, to show (reads only); none when no app provides them."""
    given = _planned_mounts.given
    return given(workspace=workspace) if given is not None else []


# What the workspaces app asks of scheduling (issue 34): whether a person's Start is held by
# the team's quiet hours. Scheduling provides it in its AppConfig.ready(); without it nothing
# holds a start.


class StartHeld(Protocol):
    """Why a person may not start a workspace of team ``team_id`` at ``now`` (a sentence),
    or "" when nothing holds it."""

    def __call__(self, *, team_id: int, now: datetime) -> str: ...


_start_held: Provided[StartHeld] = Provided("start holds (scheduling: SchedulingConfig.ready())")
# Register scheduling's answer (the team's quiet hours).
provide_start_held = _start_held.provide


def start_held(*, team_id: int, now: datetime) -> str:
    """Why a start of the team's workspace is held at ``now``; "" when no app holds it."""
    given = _start_held.given
    return given(team_id=team_id, now=now) if given is not None else ""
