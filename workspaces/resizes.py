"""Resizing a workspace in one click: a VM to another vm_size of its region, a MIG slice to
another MIG profile of its cluster (each kind's backend says which: ``resize_choices``).

The user's side only: the choice is checked against what the backend offers, and the GPUs and
money it adds against the team's GPU quota and monthly budget, holding the team row
(``select_for_update``) as a request does (the same selectors.quota_check). A resize above
either is refused, saying what is over: it changes a workspace that exists, so there is no
request to put before a platform admin; the user asks for more quota as for any other need
(teams' quota increase) and resizes then. Accepted, a running workspace is stopped first
(Stopping: Azure deallocates the VM, or the slice's pod scales to 0), then Resizing changes its
size and Starting starts it again; a stopped one goes Stopped -> Resizing -> Stopped (its Start
is checked as any Start). The worker's side is each backend's ``advance``.

Errors raised: WorkspaceActionError (shown to the user as is), ActionNotAllowed.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from common.words import usd_hourly
from teams.models import Team
from workspaces import selectors
from workspaces.backends import ResizeChoice
from workspaces.operations import _transition_and_queue
from workspaces.requests import WorkspaceActionError
from workspaces.states import HOLDS_GPUS, Status

if TYPE_CHECKING:
    from workspaces.models import Workspace

NOT_YOURS = "Only the owner or a team admin can resize this workspace."


def resize_choices(*, workspace: Workspace, now: datetime) -> list[ResizeChoice]:
    """The sizes its backend can move the workspace to now, cheapest first ([] for a kind
    that cannot be resized)."""
    choices = workspace.backend.resize_choices(workspace, now)
    return sorted(choices, key=lambda c: (c.price_per_hour, c.key))


def workspace_resize(*, user: User, workspace: Workspace, target: str, now: datetime) -> None:
    """Resize a running or stopped workspace to ``target`` (a key of resize_choices): checked,
    then handed to the worker (see the module's docstring); the history says each step.

    Raises WorkspaceActionError (not running or stopped, not a choice, over the GPU quota or
    the budget: the message says which), ActionNotAllowed."""
    access_require(user=user, perm="workspaces.resize_workspace", obj=workspace, message=NOT_YOURS)
    if not workspace.can_resize:
        raise WorkspaceActionError(
            f"A {Status(workspace.status).label.lower()} workspace cannot be resized; "
            "it can be once it is running or stopped."
        )
    choice = next(
        (c for c in resize_choices(workspace=workspace, now=now) if c.key == target), None
    )
    if choice is None:
        raise WorkspaceActionError(f"{workspace.name} cannot be resized to {target!r} here.")
    running = workspace.status == Status.RUNNING
    with transaction.atomic():
        _check_room(workspace, choice, now)
        moved = _transition_and_queue(
            workspace_id=workspace.pk,
            expected=workspace.status,
            to=Status.STOPPING if running else Status.RESIZING,
            now=now,
            actor=user,
            reason=_reason(workspace, choice, running),
            detail={"from": _current(workspace), "to": choice.key},
            resize_to=choice.key,
            resize_restart=running,
            resize_target={
                "gpu_model": choice.gpu_model,
                "gpus": str(Fraction(choice.gpus)),
                "price_per_hour": str(choice.price_per_hour),
            },
        )
        if not moved:
            raise WorkspaceActionError("The workspace changed meanwhile; look at it again.")


def _current(workspace: Workspace) -> str:
    return workspace.mig_profile or workspace.vm_size


def _reason(workspace: Workspace, choice: ResizeChoice, running: bool) -> str:
    price = usd_hourly(choice.price_per_hour)
    first = "; stopping it first (a resize needs it deallocated)" if running else ""
    return f"Resize from {_current(workspace)} to {choice.label} ({price}/hour) requested{first}"


def _check_room(workspace: Workspace, choice: ResizeChoice, now: datetime) -> None:
    """Raises WorkspaceActionError when the target does not fit the team's GPU quota or its
    budget, checked holding the team row (so racing resizes and requests are decided one after
    the other; an accepted resize holds its target from then on: workspaces.quota). A running
    workspace asks for what the target adds to what it holds; a stopped one, which holds
    nothing, for the whole target, as its next Start will. Only what grows is measured: a
    smaller or cheaper size always fits."""
    team = Team.objects.select_for_update().get(pk=workspace.team_id)
    same_model = choice.gpu_model == workspace.gpu_model
    own_gpus = Fraction(workspace.backend.gpu_share(workspace)) if same_model else Fraction(0)
    holds = workspace.status in HOLDS_GPUS
    check = selectors.quota_check(
        team=team,
        user=workspace.owner,
        gpu_model=choice.gpu_model,
        gpus=max(Fraction(0), Fraction(choice.gpus) - (own_gpus if holds else 0)),
        price_per_hour=max(
            Decimal(0), choice.price_per_hour - (workspace.price_per_hour if holds else 0)
        ),
        now=now,
    )
    over = [check.gpu_reason] if Fraction(choice.gpus) > own_gpus else []
    over += [check.budget_reason] if choice.price_per_hour > workspace.price_per_hour else []
    over = [reason for reason in over if reason]
    if over:
        raise WorkspaceActionError(
            f"{workspace.name} cannot be resized to {choice.label}: "
            + " ".join(over)
            + " Choose a smaller size, or ask your team admin for more quota or budget."
        )
