"""Business rules for workspaces: what users ask for, and what workers do about it.

User actions (request, stop, start, delete, retry) change status through ``states.transition``
and queue ``advance_workspace`` after commit. The worker side (``workspace_advance``) reloads the
workspace, works out the Azure operation its status owes, runs it through ``cloud.azure_vm`` and
moves the status on. Errors raised: WorkspaceActionError (user-facing message).
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.urls import reverse

from cloud import azure_vm
from cloud.clients import AzureSettings
from cloud.errors import CloudError
from common.permissions import access_require
from teams.models import Decision, IdlePolicy, NoticeKind, Team
from teams.notice_text import mark
from teams.selectors import membership_role
from teams.services import notice_about, notice_resolve, notice_send, quota_request_open
from workspaces import chains, selectors, states, telemetry
from workspaces.backends import backend_for, backends
from workspaces.chains import Next
from workspaces.models import (
    Kind,
    SizeOffering,
    Workspace,
    WorkspaceAgent,
    WorkspaceExtension,
)
from workspaces.ssh_keys import validate_ssh_public_key
from workspaces.states import OPERATION, Status


class WorkspaceActionError(Exception):
    """An action the user may not take now; the message is shown to them as is."""


def azure_settings() -> AzureSettings:
    """The Azure connection from Django settings (AZURE_* environment variables)."""
    return AzureSettings(
        subscription_id=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
        subnet_id=settings.AZURE_SUBNET_ID,
        endpoint=settings.AZURE_ENDPOINT,
        credential=settings.AZURE_CREDENTIAL,
        retry_total=settings.AZURE_RETRY_TOTAL,
        retry_backoff=settings.AZURE_RETRY_BACKOFF,
        polling_interval=settings.AZURE_POLLING_INTERVAL,
    )


def _queue_advance(workspace_id, claim: str = "") -> None:
    """Queue ``advance_workspace`` after commit: the first run of a new chain, or with the
    ``claim`` of a chain the reconcile sweep took over (workspaces.chains)."""
    from workspaces.tasks import advance_workspace

    kwargs = {"claim": claim} if claim else {}
    transaction.on_commit(lambda: advance_workspace.delay(str(workspace_id), **kwargs))


# --- user actions ---------------------------------------------------------------------------


def workspace_request(
    *,
    user,
    team: Team,
    name: str,
    offering: SizeOffering,
    ssh_public_key: str,
    request_key: uuid.UUID,
    now: datetime,
    justification: str = "",
    spot: bool = False,
) -> Workspace:
    """Create a VM workspace and, inside the team's GPU quota, the per-member cap and the
    monthly budget (at the current burn plus this request, it lasts the month), queue
    its provisioning. Above either, the workspace waits as ``pending_approval`` with a
    QuotaRequest that a platform admin decides. A ``spot`` workspace is an Azure Spot VM,
    priced (and measured against the budget) at the Spot price in effect at ``now``.

    The quota is checked while holding the team row (``select_for_update``) in the transaction
    that inserts, so concurrent requests cannot overshoot it. Idempotent on ``request_key``: a
    second submit of the same form returns the first workspace.
    Raises django.core.exceptions.ValidationError when ``ssh_public_key`` is not a key Azure
    takes (see workspaces.ssh_keys; a private key among them), WorkspaceActionError when the
    user is not in the team, the size is not offered or has no Spot price there (for ``spot``),
    and JustificationNeeded when the request is above quota and says no reason.
    """
    # Checked here too, not only by the form: every caller (a later API) gets the same rules,
    # and only the normal form of a public key is stored and sent to Azure.
    ssh_public_key = validate_ssh_public_key(ssh_public_key)
    existing = Workspace.objects.filter(request_key=request_key, owner=user).first()
    if existing:
        return existing
    check_member(user=user, team=team)
    if not SizeOffering.objects.filter(pk=offering.pk, offered=True).exists():
        raise WorkspaceActionError(f"{offering.vm_size} in {offering.region} is not offered.")
    price = _request_price(offering, spot, now)
    fields = {
        "kind": Kind.VM,
        "name": name,
        "vm_size": offering.vm_size,
        "region": offering.region,
        "price_per_hour": price,
        "spot": spot,
        "gpu_model": offering.gpu_model,
        "gpu_count": offering.gpu_count,
        "ssh_user": settings.WORKSPACE_SSH_USER,
        "ssh_public_key": ssh_public_key,
    }
    reason = f"Requested {offering.vm_size} ({offering.gpu_summary}) in {offering.region}"
    ask = Ask(
        user,
        team,
        request_key,
        fields,
        offering.gpu_count,
        reason + (" as a Spot VM" if spot else ""),
    )
    return workspace_insert(ask=ask, justification=justification, now=now)


def check_member(*, user, team: Team) -> None:
    """Raises WorkspaceActionError unless ``user`` is a member of ``team``."""
    if membership_role(user=user, team=team) is None:
        raise WorkspaceActionError("You are not a member of that team.")


@dataclass(frozen=True)
class Ask:
    """A workspace a user asks for: its model ``fields`` (kind, name, sizes, price_per_hour in
    USD/hour, ...), the GPUs it holds against the team's quota (``gpus``: int or Fraction) and
    the history line of its creation."""

    user: object
    team: Team
    request_key: uuid.UUID
    fields: dict
    gpus: object
    reason: str


def workspace_insert(*, ask: Ask, justification: str, now: datetime) -> Workspace:
    """Insert the workspace asked for and, inside the team's GPU quota, the per-member cap and
    the monthly budget, queue its provisioning; above any of them it waits as
    ``pending_approval`` with a QuotaRequest. The quota is checked while holding the team row
    (``select_for_update``) in the transaction that inserts, so concurrent requests cannot
    overshoot it; the name is checked there too (unique per team among workspaces not
    deleted). Idempotent on ``request_key``. Raises JustificationNeeded, NameTaken."""
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
            if check.fits:
                workspace = _insert(ask, Status.REQUESTED, now)
                _queue_advance(workspace.pk)
            else:
                workspace = _insert_pending(ask, check, justification, now)
    except IntegrityError:
        # The same request_key won a race with this one: the double click made one workspace.
        return Workspace.objects.get(request_key=ask.request_key, owner=ask.user)
    return workspace


def _request_price(offering: SizeOffering, spot: bool, now: datetime) -> Decimal:
    """USD/hour the request is quoted at: the pay-as-you-go price, or for Spot the Spot price
    in effect now. Raises WorkspaceActionError when the size has no Spot price there."""
    if not spot:
        return offering.price_per_hour
    price = selectors.offering_spot_price(offering=offering, now=now)
    if price is None:
        raise WorkspaceActionError(spot_unavailable(offering))
    return price.quantize(Decimal("0.0001"))


def spot_unavailable(offering: SizeOffering) -> str:
    """Why a size cannot be a Spot VM in its region, in words."""
    return (
        f"Azure has no Spot price for {offering.vm_size} in {offering.region}, so it cannot be "
        "requested as a Spot VM. Untick Spot VM or choose a size with a Spot price."
    )


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


def _insert_pending(ask: Ask, check, justification: str, now: datetime) -> Workspace:
    if not justification.strip():
        raise JustificationNeeded(
            " ".join(check.over) + " Say why you need it, and a platform admin will decide."
        )
    workspace = _insert(ask, Status.PENDING_APPROVAL, now)
    quota_request_open(workspace=workspace, over=check.over, justification=justification, now=now)
    return workspace


def _insert(ask: Ask, status: str, now: datetime) -> Workspace:
    workspace = Workspace.objects.create(
        team=ask.team,
        owner=ask.user,
        status=status,
        status_changed_at=now,
        request_key=ask.request_key,
        created_at=now,
        updated_at=now,
        **ask.fields,
    )
    states.record_creation(workspace=workspace, now=now, actor=ask.user, reason=ask.reason)
    return workspace


def workspace_approve(*, workspace_id, actor, reason: str, now: datetime) -> bool:
    """Move an approved workspace from pending_approval to requested and queue provisioning.
    False when it was no longer pending."""
    return _transition_and_queue(
        workspace_id=workspace_id,
        expected=Status.PENDING_APPROVAL,
        to=Status.REQUESTED,
        now=now,
        actor=actor,
        reason=reason,
    )


def _transition_and_queue(**transition) -> bool:
    """states.transition, and when it moved the workspace, queue the task that carries out
    the new status (after commit). The new status owes a new operation: the row is handed to
    the new chain, and a chain still carrying the old one stops at its next run. False,
    queueing nothing, when it did not move."""
    with transaction.atomic():
        moved = states.transition(**transition, **chains.RELEASED)
        if moved:
            _queue_advance(transition["workspace_id"])
    return moved


def workspace_close_unapproved(
    *, workspace_id, actor, reason: str, now: datetime, outcome: str = "rejected"
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


def quota_request_decided(*, workspace_id, decision: str, actor, reason: str, now: datetime):
    """Apply a decided quota request to its workspace (registered with teams.hooks in
    WorkspacesConfig.ready()): approved, it is provisioned (workspace_approve); rejected or
    expired, it is closed with that outcome (workspace_close_unapproved)."""
    if decision == Decision.APPROVED:
        workspace_approve(workspace_id=workspace_id, actor=actor, reason=reason, now=now)
    else:
        workspace_close_unapproved(
            workspace_id=workspace_id, actor=actor, reason=reason, now=now, outcome=decision
        )


# The refusal shown on the 403 page when someone else's workspace is acted on.
NOT_YOURS = "Only the owner or a team admin can change this workspace."


def _user_transition(*, user, workspace, to, reason, now, guard=None, **fields) -> None:
    """``guard``, if given, runs first inside the transaction and raises to refuse."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    try:
        states.check(workspace.status, to)
    except states.IllegalTransition as exc:
        raise WorkspaceActionError(str(exc)) from exc
    with transaction.atomic():
        if guard:
            guard()
        moved = _transition_and_queue(
            workspace_id=workspace.pk,
            expected=workspace.status,
            to=to,
            now=now,
            actor=user,
            reason=reason,
            **fields,
        )
        if not moved:
            raise WorkspaceActionError("The workspace changed meanwhile; look at it again.")


def workspace_stop(*, user, workspace: Workspace, now: datetime) -> None:
    """Deallocate a running VM, keeping its OS disk.

    Raises WorkspaceActionError, ActionNotAllowed.
    """
    _user_transition(
        user=user, workspace=workspace, to=Status.STOPPING, reason="Stopped by user", now=now
    )


def workspace_stop_automatically(
    *, workspace_id, reason: str, detail: dict, now: datetime, told: str = ""
) -> bool:
    """Stop a running workspace for a policy (idle, silent agent, nightly stop, lifetime, the
    team's budget): the same transition and task as a user's Stop, with ``reason`` (a
    sentence) and its evidence (``detail``) in the history and no actor, and its owner told
    by notice and email (workspace_stopped_tell) why: ``told``, the reason with its times
    marked (teams.notice_text), or else ``reason``. False when it was no longer running."""
    with transaction.atomic():
        moved = _transition_and_queue(
            workspace_id=workspace_id,
            expected=Status.RUNNING,
            to=Status.STOPPING,
            now=now,
            reason=reason,
            detail=detail,
        )
        if moved:
            workspace_stopped_tell(workspace_id=workspace_id, why=told or reason, now=now)
    return moved


def workspace_stopped_tell(
    *, workspace_id, why: str, now: datetime, what: str = "was stopped automatically"
) -> None:
    """Tell the owner in-app and by email, in the same words, that the workspace was stopped
    automatically at ``now`` (in the reader's time zone on a page, the team's in the email, as
    the idle warnings) and
    ``why`` (one or more sentences); the email's subject is the name and ``what``. The
    notice stays while the workspace is stopped (states.NOTICE_TRUE_WHILE); the email leaves
    once the caller's transaction commits."""
    workspace = Workspace.objects.select_related("owner").get(pk=workspace_id)
    policies = IdlePolicy.objects.filter(team_id=workspace.team_id)
    why = why.strip() if why.strip().endswith(".") else f"{why.strip()}."
    notice_send(
        users=[workspace.owner],
        subject=f"{workspace.name} {what}",
        text=(
            f"{workspace.name} was stopped automatically at {mark(now)}. {why} "
            "Start it again when you need it."
        ),
        link=reverse("workspaces:detail", args=[workspace.pk]),
        now=now,
        kind=NoticeKind.AUTO_STOP,
        about=notice_about(workspace),
        zone=policies.values_list("timezone", flat=True).first() or "UTC",
    )


class ExtensionRefused(WorkspaceActionError):
    """Keep running refused: the message says which limit of the team's policy."""


def workspace_keep_running(*, user, workspace: Workspace, now: datetime) -> WorkspaceExtension:
    """Keep a running workspace from being stopped by its idle policy for the team's
    extension_hours (hours), at most extensions_per_day times in 24 hours. Logged as a
    WorkspaceExtension, which is returned.

    Idempotent: while an extension is in force and its stop warning (the policy's warn_minutes
    before it ends) has not begun, Keep running returns that extension and spends nothing, so
    a double click or a second tab does not use up the day's extensions. Inside the warning,
    which is when the owner is told the stop is near, it spends the next one. The workspace
    row is locked (select_for_update) in the transaction that reads and inserts, so racing
    clicks are decided one after the other. Raises ExtensionRefused, ActionNotAllowed."""
    access_require(user=user, perm="workspaces.act_on_workspace", obj=workspace, message=NOT_YOURS)
    policy = IdlePolicy.objects.filter(team_id=workspace.team_id).first() or IdlePolicy()
    with transaction.atomic():
        locked = Workspace.objects.select_for_update().filter(pk=workspace.pk)
        if locked.values_list("status", flat=True).first() != Status.RUNNING:
            raise ExtensionRefused("Only a running workspace can be kept running.")
        in_force = _extension_in_force(workspace, policy, now)
        if in_force is not None:
            return in_force
        used = workspace.extensions.filter(at__gt=now - timedelta(days=1)).count()
        if used >= policy.extensions_per_day:
            raise ExtensionRefused(
                f"The team allows {policy.extensions_per_day} extension(s) a day; "
                f"{used} used in the last 24 hours."
            )
        until = now + timedelta(hours=policy.extension_hours * settings.IDLE_TIME_SCALE)
        extension = WorkspaceExtension.objects.create(
            workspace=workspace, user=user, at=now, hours=policy.extension_hours, until=until
        )
        WorkspaceAgent.objects.filter(pk=workspace.pk).update(kept_until=until)
        _stop_warnings_resolve(workspace, user, until, policy, now)
    return extension


def _stop_warnings_resolve(workspace: Workspace, user, until: datetime, policy, now) -> None:
    local = until.astimezone(ZoneInfo(policy.timezone or "UTC"))
    notice_resolve(
        about=f"workspace:{workspace.pk}",
        kinds=[NoticeKind.STOP_WARNING],
        now=now,
        by=user,
        reason=f"Kept running by {user.username} until {local:%H:%M %Z}",
    )


def _extension_in_force(workspace: Workspace, policy, now: datetime) -> WorkspaceExtension | None:
    """The extension that keeps the workspace beyond its stop warning from ``now``, if any."""
    warning = timedelta(minutes=telemetry.policy_from_row(policy).warn_minutes)
    return (
        WorkspaceExtension.objects.filter(workspace_id=workspace.pk, until__gt=now + warning)
        .order_by("-until")
        .first()
    )


def workspace_start(*, user, workspace: Workspace, now: datetime) -> None:
    """Start a stopped (deallocated) VM. Its GPUs count against the team's quota again and it
    burns money again, so the GPU quota and the budget are checked as for a new request,
    holding the team row. Raises WorkspaceActionError (saying what is over), ActionNotAllowed."""
    _user_transition(
        user=user,
        workspace=workspace,
        to=Status.STARTING,
        reason="Started by user",
        now=now,
        guard=lambda: _check_room_to_start(workspace, now),
        evicted_at=None,
    )


def _check_room_to_start(workspace: Workspace, now: datetime) -> None:
    team = Team.objects.select_for_update().get(pk=workspace.team_id)
    check = selectors.quota_check(
        team=team,
        user=workspace.owner,
        gpu_model=workspace.gpu_model,
        gpus=backend_for(workspace.kind).gpu_share(workspace),
        price_per_hour=workspace.price_per_hour,
        now=now,
    )
    if check.over_to_start:
        raise WorkspaceActionError(
            " ".join(check.over_to_start)
            + " Stop or delete another workspace first, or ask your team admin for more quota."
        )
    # Judged on what it does from now on, not on the idleness that stopped it.
    telemetry.agent_activity_reset(workspace_id=workspace.pk)


def workspace_delete(*, user, workspace: Workspace, now: datetime) -> None:
    """Delete the VM, its NIC and OS disk, and revoke its agent's token.
    Raises WorkspaceActionError, ActionNotAllowed."""
    _user_transition(
        user=user,
        workspace=workspace,
        to=Status.DELETING,
        reason="Deleted by user",
        now=now,
        failed_operation="",
    )
    telemetry.agent_token_revoke(workspace_id=workspace.pk, now=now)


def workspace_retry(*, user, workspace: Workspace, now: datetime) -> None:
    """Do again the operation that failed (``failed_operation``): a failed delete is deleted
    again, creating nothing; a failed create, or a pre-check Azure refused, is provisioned
    again. Raises WorkspaceActionError, ActionNotAllowed."""
    cleared = {
        "error_code": "",
        "error_message": "",
        "operation": "",
        "operation_token": "",
        "failed_operation": "",
    }
    if workspace.failed_operation == "delete":
        _user_transition(
            user=user,
            workspace=workspace,
            to=Status.DELETING,
            reason="Retry of the delete requested by user",
            now=now,
            **cleared,
        )
        return
    _user_transition(
        user=user,
        workspace=workspace,
        to=Status.REQUESTED,
        reason="Retry requested by user",
        now=now,
        # The retry creates a new VM: its agent gets a new token, the old one stops working.
        guard=lambda: telemetry.agent_token_issue(workspace_id=workspace.pk, now=now, new_vm=True),
        **cleared,
    )


# --- the worker side ---------------------------------------------------------------------


def workspace_advance(*, workspace_id, clock: Callable[[], datetime]) -> Next:
    """Move the operation the workspace's status owes one step on, through its kind's backend
    (workspaces.backends; a VM: workspaces.backends.vm, which pre-checks a requested VM
    against Azure's quotas first), and say what the caller does next (see Next).

    ``clock`` returns the current time (aware, UTC); it is read at each transition because an
    Azure operation takes minutes between them.

    Safe to call twice: a workspace in a steady status is left alone, an operation whose
    continuation token was saved is polled rather than started again, and the final
    compare-and-set lets only one caller record the result. A refused operation (a CloudError
    that is not transient) fails the workspace (workspace_operation_failed).
    Raises CloudError when the cloud answered with a transient error (the task retries).
    """
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if workspace is None:
        return Next.DONE
    try:
        return backend_for(workspace.kind).advance(workspace, clock)
    except CloudError as exc:
        if exc.transient:
            raise
        workspace_operation_failed(workspace_id=workspace.pk, error=exc, now=clock())
        return Next.DONE


@dataclass(frozen=True)
class Precheck:
    """Azure's answer for one size in one region: ``problem`` says in plain words why it cannot
    be created there now ("" when it fits), ``advice`` what happens meanwhile."""

    problem: str = ""
    advice: str = ""

    @property
    def fits(self) -> bool:
        return not self.problem


# Azure's usages name for the one regional quota every Spot VM counts against, whatever its
# family, instead of its family and "cores" (Total Regional vCPUs).
SPOT_QUOTA = "lowPriorityCores"
SPOT_QUOTA_LABEL = "Total Regional Low-priority vCPUs (Spot)"


def _quotas(family: str, *, spot: bool) -> tuple[str, ...]:
    """The usages names a VM of quota family ``family`` counts against, in checking order."""
    return (SPOT_QUOTA,) if spot else (family, "cores")


def azure_precheck(*, region: str, vm_size: str, spot: bool = False) -> Precheck:
    """Whether Azure would take one more VM of ``vm_size`` in ``region`` now: the size is
    offered to the subscription there (Resource SKUs restrictions), and the vCPUs in use plus
    the size's vCPUs stay within the limits of its quota family and the region's total, or for
    a Spot VM (``spot``) within the region's Spot (low-priority) vCPUs (usages API).

    Read-only (two ARM GETs). Raises CloudError when Azure does not answer them.
    """
    sku = azure_vm.sku_info(azure_settings(), location=region, vm_size=vm_size)
    if not sku.offered:
        return Precheck(
            f"{vm_size} is not available to this subscription in {region} ({sku.reason}).",
            "Waiting until Azure offers it; a platform admin can ask Azure to lift the "
            "restriction or allow another region.",
        )
    usages = {u.name.lower(): u for u in azure_vm.regional_usage(azure_settings(), location=region)}
    for quota in _quotas(sku.family, spot=spot):
        usage = usages.get(quota.lower())
        if usage is not None and usage.current_value + sku.vcpus > usage.limit:
            return Precheck(
                f"Azure quota for {_quota_label(usage)} in {region} is {usage.current_value}/"
                f"{usage.limit} vCPUs; this size needs {sku.vcpus} more.",
                "Waiting for capacity; a platform admin can raise the subscription's quota.",
            )
    return Precheck()


def _quota_label(usage: azure_vm.Usage) -> str:
    if usage.name.lower() == SPOT_QUOTA.lower():
        return SPOT_QUOTA_LABEL
    return usage.localized_name if usage.name == "cores" else usage.name


@dataclass(frozen=True)
class Headroom:
    """What Azure has left for one size in one region: ``vcpus_left`` (the lower of its quota
    family's and the region's total vCPUs left; for ``spot``, the region's Spot vCPUs left)
    and ``vms_left``, how many more VMs of the size that allows. ``problem`` says in words why
    there is no number (the size is restricted to this subscription, or Azure did not
    answer)."""

    region: str
    vm_size: str
    family: str = ""
    vcpus_left: int | None = None
    vms_left: int | None = None
    problem: str = ""
    spot: bool = False

    @property
    def quota_label(self) -> str:
        """What ``vcpus_left`` is of: the Spot quota, or the size's quota family."""
        return SPOT_QUOTA_LABEL if self.spot else self.family


def _usage_generation_key(region: str) -> str:
    return f"azure-usage-generation:{region}"


def azure_usage_changed(*, region: str) -> None:
    """Forget what Azure's quota usage in ``region`` was: the portal has just begun or ended
    an operation that changes it (a VM's or a node pool's create, start, deallocate or
    delete), so the next azure_headroom asks Azure again instead of showing the vCPUs left
    before it."""
    key = _usage_generation_key(region)
    try:
        cache.incr(key)
    except ValueError:  # never counted yet (or evicted): any new value makes old entries stale
        cache.set(key, uuid.uuid4().int % 10**9, None)


def azure_headroom(*, region: str, vm_size: str, spot: bool = False) -> Headroom:
    """Azure headroom: the quota left for ``vm_size`` in ``region``, as a Spot VM if ``spot``
    (Resource SKUs and usages APIs: two ARM GETs), the one definition the approvals page
    shows. Freshness rule: kept at most AZURE_HEADROOM_CACHE_SECONDS so a busy approval queue
    does not get the subscription throttled, and forgotten at once whenever the portal
    changes the region's usage (azure_usage_changed), so it never shows the vCPUs left before
    a VM or node pool the portal made or deleted. Azure errors come back as ``problem``; it
    never raises them."""
    generation = cache.get(_usage_generation_key(region), 0)
    key = f"azure-headroom:{region}:{vm_size}:{'spot' if spot else 'regular'}:{generation}"
    headroom = cache.get(key)
    if headroom is None:
        try:
            headroom = _headroom(region, vm_size, spot=spot)
        except CloudError as exc:
            problem = f"Azure did not answer: {exc.code}."
            return Headroom(region, vm_size, problem=problem, spot=spot)
        cache.set(key, headroom, settings.AZURE_HEADROOM_CACHE_SECONDS)
    return headroom


def _headroom(region: str, vm_size: str, *, spot: bool) -> Headroom:
    sku = azure_vm.sku_info(azure_settings(), location=region, vm_size=vm_size)
    if not sku.offered:
        return Headroom(region, vm_size, problem=f"Not available here ({sku.reason}).", spot=spot)
    usages = {u.name.lower(): u for u in azure_vm.regional_usage(azure_settings(), location=region)}
    found = [usages.get(quota.lower()) for quota in _quotas(sku.family, spot=spot)]
    left = [u.limit - u.current_value for u in found if u is not None]
    if not left:
        problem = "Azure reports no quota for it."
        return Headroom(region, vm_size, sku.family, problem=problem, spot=spot)
    vcpus = max(0, min(left))
    vms = vcpus // sku.vcpus if sku.vcpus else None
    return Headroom(region, vm_size, sku.family, vcpus, vms, spot=spot)


# Where a workspace goes when Azure refuses its operation for good.
FAILED_TO = {
    Status.PROVISIONING: Status.FAILED,
    Status.STOPPING: Status.RUNNING,
    Status.STARTING: Status.STOPPED,
    Status.DELETING: Status.FAILED,
}


def workspace_operation_failed(*, workspace_id, error: CloudError, now: datetime) -> None:
    """Record that Azure refused the workspace's operation, with Azure's code and message.

    A failed create first removes whatever it left (VM in Failed state, NIC, OS disk), so nothing
    is billed or orphaned. Raises CloudError if that clean-up itself hits a transient error.
    """
    workspace = Workspace.objects.filter(pk=workspace_id).first()
    if workspace is not None and workspace.status == Status.REQUESTED:
        _precheck_failed(workspace, error, now)
        return
    if workspace is None or workspace.status not in FAILED_TO:
        return
    backend = backend_for(workspace.kind)
    if workspace.status == Status.PROVISIONING:
        backend.clean_up_failed_create(workspace)
    service = backend.service
    operation, to = OPERATION[workspace.status][0], FAILED_TO[workspace.status]
    states.transition(
        workspace_id=workspace.pk,
        expected=workspace.status,
        to=to,
        now=now,
        reason=f"{service} refused the {operation}: {error.code}",
        detail={"code": error.code, "message": error.message, "status": error.status},
        operation="",
        operation_token="",
        error_code=error.code,
        error_message=error.message,
        # What Retry does again; a failed stop or start is redone by Stop or Start.
        failed_operation=operation if to == Status.FAILED else "",
    )


def _precheck_failed(workspace: Workspace, error: CloudError, now: datetime) -> None:
    """Azure refused the pre-check itself (e.g. AuthorizationFailed without Reader on the
    subscription, or throttling beyond the retries): fail the workspace with Azure's code and
    message. Nothing was created, so there is nothing to clean up."""
    states.transition(
        workspace_id=workspace.pk,
        expected=Status.REQUESTED,
        to=Status.FAILED,
        now=now,
        reason=f"Azure refused the quota and size check: {error.code}",
        detail={"code": error.code, "message": error.message, "status": error.status},
        waiting_reason="",
        error_code=error.code,
        error_message=error.message,
        failed_operation="create",
    )


def workspace_access_queue(*, user) -> int:
    """Queue refresh_slice_access for each workspace owned by ``user`` whose provider objects
    name their identity (after their Entra ID identity changed: teams.hooks.identity_changed;
    each kind's backend says which, see WorkspaceBackend.access_to_refresh). Returns how many."""
    from workspaces.tasks import refresh_slice_access

    ids = [pk for backend in backends() for pk in backend.access_to_refresh(owner=user)]
    for workspace_id in ids:
        refresh_slice_access.delay(str(workspace_id))
    return len(ids)


def workspace_access_refresh(*, workspace_id) -> None:
    """The worker's side: the workspace's provider objects made to grant its owner's identity
    as it is now (its backend's access_refresh). Raises CloudError."""
    workspace = Workspace.objects.select_related("node_pool", "owner", "team").get(pk=workspace_id)
    backend_for(workspace.kind).access_refresh(workspace)


def workspace_reconcile(*, now: datetime, stale_after: timedelta) -> list:
    """Take over and queue again the operation of workspaces in progress whose chain of tasks
    is lost: its next run overdue by more than ``stale_after`` (or, held by no chain, unchanged
    for that long). A chain waiting for its next run (a poll, a back-off, Azure's Retry-After)
    is left alone, so each operation has one chain (workspaces.chains). Returns the ids queued.
    Lost tasks are rare, but nobody should wait forever."""
    stale_before = now - stale_after
    queued = []
    for workspace_id in selectors.workspace_stale_in_progress(stale_before=stale_before):
        rows = Workspace.objects.filter(pk=workspace_id, status__in=states.IN_PROGRESS)
        claim = chains.take_over(rows, stale_before=stale_before, now=now)
        if claim:
            _queue_advance(workspace_id, claim=claim)
            queued.append(workspace_id)
    return queued
