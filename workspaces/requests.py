"""Asking for a workspace of any kind: validate the ask, insert the row (within quota: queued
at once; above it: pending a quota request), and the approval side of requests above quota (approve,
close unapproved, the decision callback from teams). Each kind's own request service, next to
its backend (workspaces.backends.vm_request, clusters.backends.mig...), builds an Ask and calls
workspace_insert.

Errors raised: WorkspaceActionError and its kinds NameTaken, JustificationNeeded (the message
is shown to the user as is; refusal_field names the form field it is about).
"""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any
from uuid import UUID

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from teams.models import Decision, Team
from teams.quota_requests import quota_request_open
from teams.selectors import membership_role
from workspaces import hooks, selectors, states
from workspaces.hooks import ALL_MOUNTS, MountChoice
from workspaces.models import Workspace
from workspaces.selectors import QuotaCheck
from workspaces.states import Status
from workspaces.transitions import advance_queue, transition_and_queue


class WorkspaceActionError(Exception):
    """An action the user may not take now; the message is shown to them as is."""


class CeilingTooLow(WorkspaceActionError):
    """The price ceiling for equivalent sizes is below the chosen size's own price."""


def check_member(*, user: User, team: Team) -> None:
    """Raises WorkspaceActionError unless ``user`` is a member of ``team``."""
    if membership_role(user=user, team=team) is None:
        raise WorkspaceActionError("You are not a member of that team.")


@dataclass(frozen=True)
class Ask:
    """A workspace a user asks for: its model ``fields`` (kind, name, sizes, price_per_hour in
    USD/hour, ...), the GPUs it holds against the team's quota (``gpus``: int or Fraction) and
    the history line of its creation."""

    user: User
    team: Team
    request_key: uuid.UUID
    fields: dict[str, Any]
    gpus: int | Fraction
    reason: str
    # Above the team's GPU quota alone (not the per-member cap or the budget): wait in the
    # fair queue (status queued, scheduling.queue) instead of asking a platform admin.
    queue_when_full: bool = False
    # Why its node pool has no room for it now ("" when it has, or uses no pool): with
    # ``queue_when_full`` it then waits in the fair queue instead of waiting on the pool.
    no_room: str = ""
    # What to mount (docs/storage.md): checked against the team's shares the user may mount.
    mounts: MountChoice = ALL_MOUNTS


class SnapshotRefused(WorkspaceActionError):
    """A kept disk snapshot the request may not start from (not the user's, another team's
    or region's, or deleted)."""


class MountRefused(WorkspaceActionError):
    """A share asked for that the team does not have, or the user may not mount."""


def check_mounts(*, user: User, team: Team, mounts: MountChoice) -> None:
    """Raises MountRefused unless every share named is one the user may mount in the team
    (hooks.mount_options: ready, and their role's access allows it)."""
    if mounts.shares is None:
        return
    allowed = hooks.mount_options(team=team, user=user)
    refused = [name for name in mounts.shares if name not in allowed]
    if refused:
        offer = ", ".join(allowed) or "none"
        raise MountRefused(
            f"{', '.join(refused)}: not a share of {team.name} you may mount "
            f"(you may mount: {offer})."
        )


def workspace_insert(*, ask: Ask, justification: str, now: datetime) -> Workspace:
    """Insert the workspace asked for and, inside the team's GPU quota, the per-member cap and
    the monthly budget, queue its provisioning; above any of them it waits as
    ``pending_approval`` with a QuotaRequest, or, above the GPU quota alone and with
    ``ask.queue_when_full``, as ``queued`` in the fair queue (scheduling.queue), as it does
    with ``ask.no_room`` (its node pool is full) inside them. The quota is
    checked while holding the team row (``select_for_update``) in the transaction that
    inserts, so concurrent requests cannot overshoot it; the name is checked there too
    (unique per team among workspaces not deleted). Idempotent on ``request_key``. Raises
    JustificationNeeded, NameTaken, MountRefused (before anything is inserted)."""
    check_mounts(user=ask.user, team=ask.team, mounts=ask.mounts)
    try:
        with transaction.atomic():
            team = Team.objects.select_for_update().get(pk=ask.team.pk)
            # A double submit that waited for the lock finds its twin, not a taken name.
            twin = Workspace.objects.filter(request_key=ask.request_key, owner=ask.user).first()
            if twin:
                return twin
            _check_name_free(team, ask.fields["name"])
            check = selectors.quota_check(
                team=team,
                user=ask.user,
                gpu_model=ask.fields["gpu_model"],
                gpus=ask.gpus,
                price_per_hour=ask.fields["price_per_hour"],
                now=now,
            )
            pool_full = ask.queue_when_full and bool(ask.no_room)
            if check.fits and not pool_full:
                workspace = _insert(ask, Status.REQUESTED, now)
                advance_queue(workspace.pk)
            elif ask.queue_when_full and (check.fits or check.over == [check.gpu_reason]):
                waiting = ask.no_room if check.fits else check.gpu_reason
                workspace = _insert(ask, Status.QUEUED, now, waiting=waiting)
            else:
                workspace = _insert_pending(ask, check, justification, now)
    except IntegrityError:
        # The same request_key won a race with this one: the double click made one workspace.
        twin = Workspace.objects.filter(request_key=ask.request_key, owner=ask.user).first()
        if twin is None:
            raise RequestKeyTaken(REQUEST_KEY_TAKEN) from None
        return twin
    return workspace


# The ids of the workspaces inserted under ``inserts_recorded`` in this context (a thread or an
# asyncio task, so concurrent requests never see each other's): the services return the twin of
# a repeated request key as they return a new workspace, and only the caller asks which it was.
_inserted: ContextVar[set[UUID] | None] = ContextVar("workspaces_inserted", default=None)


@contextmanager
def inserts_recorded() -> Iterator[set[UUID]]:
    """Yield the set of ids of the workspaces that the requests made inside the block
    inserted (not the twins they found for a request key seen before): the API answers 201 for
    the call that made a workspace and 200 for every repeat, concurrent repeats included."""
    inserted: set[UUID] = set()
    token = _inserted.set(inserted)
    try:
        yield inserted
    finally:
        _inserted.reset(token)


class RequestKeyTaken(WorkspaceActionError):
    """The request key (an API caller's Idempotency-Key) is another user's request's."""


REQUEST_KEY_TAKEN = "That request key was used for another request; send a new one."


class NameTaken(WorkspaceActionError):
    """The team already has a workspace of that name that is not deleted."""


def _check_name_free(team: Team, name: str) -> None:
    """Raises NameTaken when ``team`` has a workspace named ``name`` that is not deleted.
    Called while holding the team row, so two requests racing for one name get one each way."""
    if Workspace.objects.filter(team=team, name=name).exclude(status=Status.DELETED).exists():
        raise NameTaken(
            f"The team already has a workspace named “{name}”; pick another name, or delete "
            "that one first."
        )


class JustificationNeeded(WorkspaceActionError):
    """Above quota without a reason; the message says what is over."""


def refusal_field(exc: WorkspaceActionError) -> str | None:
    """The request form's field a refusal is about, by the same name on the pages and in the
    API: "max_price" (CeilingTooLow), "justification" (JustificationNeeded), "name"
    (NameTaken), "mounts" (MountRefused), "from_snapshot" (SnapshotRefused); None for a
    refusal of the request as a whole."""
    for refusal, field in _REFUSAL_FIELDS:
        if isinstance(exc, refusal):
            return field
    return None


_REFUSAL_FIELDS: tuple[tuple[type[WorkspaceActionError], str], ...] = (
    (CeilingTooLow, "max_price"),
    (JustificationNeeded, "justification"),
    (NameTaken, "name"),
    (MountRefused, "mounts"),
    (SnapshotRefused, "from_snapshot"),
)


def _insert_pending(ask: Ask, check: QuotaCheck, justification: str, now: datetime) -> Workspace:
    if not justification.strip():
        raise JustificationNeeded(
            " ".join(check.over) + " Say why you need it, and a platform admin will decide."
        )
    workspace = _insert(ask, Status.PENDING_APPROVAL, now)
    quota_request_open(workspace=workspace, over=check.over, justification=justification, now=now)
    return workspace


def _insert(ask: Ask, status: str, now: datetime, waiting: str = "") -> Workspace:
    workspace = Workspace.objects.create(
        waiting_reason=waiting,
        queue_when_full=ask.queue_when_full,
        team=ask.team,
        owner=ask.user,
        status=status,
        status_changed_at=now,
        request_key=ask.request_key,
        created_at=now,
        updated_at=now,
        mount_shares=None if ask.mounts.shares is None else list(ask.mounts.shares),
        mount_home=ask.mounts.home,
        **ask.fields,
    )
    recorded = _inserted.get()
    if recorded is not None:
        recorded.add(workspace.pk)
    states.record_creation(workspace=workspace, now=now, actor=ask.user, reason=ask.reason)
    return workspace


def workspace_approve(*, workspace_id: UUID | str, actor: User, reason: str, now: datetime) -> bool:
    """Move an approved workspace from pending_approval to requested and queue provisioning.
    False when it was no longer pending."""
    return transition_and_queue(
        workspace_id=workspace_id,
        expected=Status.PENDING_APPROVAL,
        to=Status.REQUESTED,
        now=now,
        actor=actor,
        reason=reason,
    )


def workspace_close_unapproved(
    *,
    workspace_id: UUID | str,
    actor: User | None,
    reason: str,
    now: datetime,
    outcome: str = "rejected",
) -> bool:
    """Close a workspace whose request was rejected or expired (``outcome``: 'rejected' or
    'expired', shown in its history instead of 'Deleted'); nothing exists in Azure yet.
    False when it was no longer pending."""
    return states.transition(
        workspace_id=workspace_id,
        expected=Status.PENDING_APPROVAL,
        to=Status.DELETED,
        now=now,
        actor=actor,
        reason=reason,
        detail={"outcome": outcome},
    )


def quota_request_decided(
    *,
    workspace_id: UUID | str,
    decision: str,
    actor: User | None,
    reason: str,
    now: datetime,
    resize_to: str = "",
) -> None:
    """Apply a decided quota request to its workspace (registered with teams.hooks in
    WorkspacesConfig.ready()): approved, it is provisioned (workspace_approve); rejected or
    expired, it is closed with that outcome (workspace_close_unapproved). A resize request
    (``resize_to``) is workspaces.resize_approvals' to apply; ``actor`` None for an expiry."""
    if resize_to:
        return
    if decision == Decision.APPROVED:
        assert actor is not None, "an approval has its approver"  # only an expiry has none
        workspace_approve(workspace_id=workspace_id, actor=actor, reason=reason, now=now)
    else:
        workspace_close_unapproved(
            workspace_id=workspace_id, actor=actor, reason=reason, now=now, outcome=decision
        )
