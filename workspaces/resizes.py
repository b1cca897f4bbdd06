"""Resizing a workspace in one click: a VM to another vm_size of its region, a MIG slice to
another MIG profile of its cluster (each kind's backend says which: ``resize_choices``).

The user's side only: the choice is checked against what the backend offers, and the GPUs and
money it adds against the team's GPU quota and monthly budget, holding the team row
(``select_for_update``) as a request does (the same selectors.quota_check): a running
workspace for what it grows, a stopped one for the whole target, as its next Start will be, so
a resize never strands a VM that cannot start. A resize above either is refused, saying what
is over, or, with a reason, waits for a platform admin's approval as a request does (a
QuotaRequest with ``resize_to``; workspaces.resize_approvals carries out the decision); the
Resize list marks the sizes over quota (resize_options). Accepted, a running workspace is
stopped first (Stopping: Azure deallocates the VM, or the slice's pod scales to 0), then
Resizing changes its size and Starting starts it again; a stopped one goes Stopped ->
Resizing -> Stopped (its Start is checked as any Start). The worker's side is each backend's
``advance``.

Errors raised: WorkspaceActionError (shown to the user as is), ActionNotAllowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING

from django.contrib.auth.models import User
from django.db import transaction

from common.permissions import access_require
from common.words import usd_hourly
from teams.models import Decision, QuotaRequest, Team
from teams.quota_requests import quota_request_open
from workspaces import selectors
from workspaces.backends import ResizeChoice
from workspaces.requests import WorkspaceActionError
from workspaces.states import HOLDS_GPUS, Status
from workspaces.transitions import transition_and_queue

if TYPE_CHECKING:
    from workspaces.models import Workspace

NOT_YOURS = "Only the owner or a team admin can resize this workspace."


def resize_choices(*, workspace: Workspace, now: datetime) -> list[ResizeChoice]:
    """The sizes its backend can move the workspace to now, cheapest first ([] for a kind
    that cannot be resized)."""
    choices = workspace.backend.resize_choices(workspace, now)
    return sorted(choices, key=lambda c: (c.price_per_hour, c.key))


def workspace_resize(
    *, user: User, workspace: Workspace, target: str, now: datetime, justification: str = ""
) -> bool:
    """Resize a running or stopped workspace to ``target`` (a key of resize_choices): checked,
    then handed to the worker (see the module's docstring); the history says each step. True
    when handed to the worker. Over the team's GPU quota or budget, with a ``justification``
    it waits for a platform admin instead, as a request does (a QuotaRequest with resize_to;
    decided in workspaces.resize_approvals): False.

    Raises WorkspaceActionError (not running or stopped, not a choice, over the GPU quota or
    the budget without a justification: the message says which; a resize already waiting for
    approval), ActionNotAllowed."""
    access_require(user=user, perm="workspaces.resize_workspace", obj=workspace, message=NOT_YOURS)
    choice = _choice(workspace, target, now)
    with transaction.atomic():
        over = _check_room(workspace, choice, now)
        if over:
            _ask_approval(user, workspace, choice, over, justification, now)
            return False
        resize_start(workspace=workspace, choice=choice, actor=user, reason="", now=now)
    return True


def _choice(workspace: Workspace, target: str, now: datetime) -> ResizeChoice:
    """The resize choice ``target`` names. Raises WorkspaceActionError when the workspace
    cannot be resized now or not to that."""
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
    return choice


def _ask_approval(
    user: User,
    workspace: Workspace,
    choice: ResizeChoice,
    over: list[str],
    justification: str,
    now: datetime,
) -> None:
    """Put the resize before a platform admin (teams.quota_requests), or raise
    WorkspaceActionError saying what is over when no reason is given."""
    refused = f"{workspace.name} cannot be resized to {choice.label}: " + " ".join(over)
    if not justification.strip():
        raise WorkspaceActionError(
            f"{refused} Choose a smaller size, ask your team admin for more quota or budget, "
            "or give a reason to ask a platform admin to approve it."
        )
    pending = QuotaRequest.objects.filter(workspace=workspace, decision=Decision.PENDING)
    if pending.exclude(resize_to="").exists():
        raise WorkspaceActionError(f"A resize of {workspace.name} already waits for approval.")
    quota_request_open(
        workspace=workspace,
        over=over,
        justification=justification,
        now=now,
        resize=(choice.key, choice.label, choice.price_per_hour),
        requester=user,
    )


def resize_start(
    *, workspace: Workspace, choice: ResizeChoice, actor: User, reason: str, now: datetime
) -> None:
    """Hand the resize to the worker: a running workspace is stopped first, a stopped one goes
    to Resizing; its target is held from now on (Workspace.resize_target). ``reason`` comes
    before the history's usual line (e.g. who approved it). Raises WorkspaceActionError when
    the workspace changed meanwhile."""
    running = workspace.status == Status.RUNNING
    line = _reason(workspace, choice, running)
    moved = transition_and_queue(
        workspace_id=workspace.pk,
        expected=workspace.status,
        to=Status.STOPPING if running else Status.RESIZING,
        now=now,
        actor=actor,
        reason=f"{reason}: {line}" if reason else line,
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


@dataclass(frozen=True)
class ResizeOption:
    """A size the workspace can move to (``choice``) and ``over``: why the team's GPU quota or
    budget does not allow it now, in words ([] when it fits). What the Resize list shows."""

    choice: ResizeChoice
    over: list[str]


def resize_options(*, workspace: Workspace, now: datetime) -> list[ResizeOption]:
    """resize_choices, each measured against the team's quota and budget as workspace_resize
    will measure it (without the lock: the POST checks again). Eight queries."""
    choices = resize_choices(workspace=workspace, now=now)
    if not choices:
        return []
    checks = selectors.quota_checks(
        team=workspace.team,
        user=workspace.owner,
        asks=[_ask(workspace, choice) for choice in choices],
        now=now,
    )
    return [
        ResizeOption(choice, _over(workspace, choice, check))
        for choice, check in zip(choices, checks, strict=True)
    ]


def _ask(workspace: Workspace, choice: ResizeChoice) -> tuple[str, Fraction, Decimal]:
    """What the resize asks of the team: (GPU model, GPUs, USD/hour). A running workspace asks
    for what the target adds to what it holds; a stopped one, which holds nothing, for the
    whole target, as its next Start will."""
    holds = workspace.status in HOLDS_GPUS
    same_model = choice.gpu_model == workspace.gpu_model
    own = Fraction(workspace.backend.gpu_share(workspace)) if same_model and holds else 0
    price = workspace.price_per_hour if holds else Decimal(0)
    return (
        choice.gpu_model,
        max(Fraction(0), Fraction(choice.gpus) - own),
        max(Decimal(0), choice.price_per_hour - price),
    )


def _over(workspace: Workspace, choice: ResizeChoice, check: selectors.QuotaCheck) -> list[str]:
    """Why ``check`` refuses the resize. Only what grows is measured: a smaller or cheaper size
    always fits."""
    same_model = choice.gpu_model == workspace.gpu_model
    own = Fraction(workspace.backend.gpu_share(workspace)) if same_model else Fraction(0)
    over = [check.gpu_reason] if Fraction(choice.gpus) > own else []
    over += [check.budget_reason] if choice.price_per_hour > workspace.price_per_hour else []
    return [reason for reason in over if reason]


def _check_room(workspace: Workspace, choice: ResizeChoice, now: datetime) -> list[str]:
    """Why the target does not fit the team's GPU quota or its budget (_ask, _over; [] when
    it fits), checked holding the team row, so racing resizes and requests are decided one
    after the other; an accepted resize holds its target from then on (workspaces.quota)."""
    team = Team.objects.select_for_update().get(pk=workspace.team_id)
    gpu_model, gpus, price = _ask(workspace, choice)
    check = selectors.quota_check(
        team=team, user=workspace.owner, gpu_model=gpu_model, gpus=gpus,
        price_per_hour=price, now=now,
    )  # fmt: skip
    return _over(workspace, choice, check)
