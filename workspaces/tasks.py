"""Celery tasks: thin wrappers that pass ids to services."""

import logging
from typing import Any  # a bound task is a Celery Task, which ships no types

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from cloud.errors import CloudError
from workspaces import chains, operations
from workspaces.evictions import workspace_evictions_detect
from workspaces.kube_activity import namespace_activity_scan
from workspaces.leavers import leaver_workspaces_apply
from workspaces.models import Workspace
from workspaces.sweep import idle_sweep as sweep
from workspaces.telemetry import telemetry_downsample

log = logging.getLogger(__name__)


@shared_task(bind=True, acks_late=True, max_retries=None)
def advance_workspace(self: Any, workspace_id: str, claim: str = "") -> None:
    """Run the Azure operation that the workspace's status owes (create, start, deallocate,
    delete), polling it every AZURE_POLLING_INTERVAL seconds by re-queueing itself rather than
    sleeping, so a VM create that takes minutes holds no worker. A requested workspace that
    waits for Azure quota or an unrestricted size is checked again every
    AZURE_PRECHECK_RETRY_SECONDS the same way. Transient Azure errors (429, 409 Conflict, 5xx)
    are retried with back-off, at most WORKSPACE_RETRY_MAX times in a row counted on the
    workspace, then recorded as a failure with Azure's error.

    ``claim`` is the id of the chain of tasks this run belongs to (workspaces.chains): one
    chain per operation; a run whose chain was taken over stops quietly."""
    chains.run(
        task=self,
        args=[workspace_id],
        rows=Workspace.objects.filter(pk=workspace_id),
        claim=claim,
        step=lambda: operations.workspace_advance(workspace_id=workspace_id, clock=timezone.now),
        give_up=lambda error: operations.workspace_operation_failed(
            workspace_id=workspace_id, error=error, now=timezone.now()
        ),
    )


@shared_task(bind=True, acks_late=True, max_retries=None)
def refresh_slice_access(self: Any, workspace_id: str) -> None:
    """Make a MIG slice's owner RoleBinding name its owner's Entra ID identity as it is now.
    Transient Kubernetes errors are retried with back-off up to WORKSPACE_RETRY_MAX times;
    anything else is logged, and the slice's next start applies the identity."""
    try:
        operations.workspace_access_refresh(workspace_id=workspace_id)
    except CloudError as exc:
        if exc.transient and self.request.retries < settings.WORKSPACE_RETRY_MAX:
            delay = chains.retry_delay(attempt=self.request.retries, retry_after=exc.retry_after)
            raise self.retry(exc=exc, countdown=delay) from exc
        log.warning("access to MIG workspace %s not refreshed: %s", workspace_id, exc)


@shared_task
def reconcile_workspaces() -> int:
    """Beat: take over and re-queue the operations whose chain of tasks was lost (overdue by
    two reconcile intervals). Returns how many."""
    return len(operations.workspace_reconcile(now=timezone.now(), stale_after=chains.grace()))


@shared_task
def detect_spot_evictions() -> int:
    """Beat, every SPOT_EVICTION_CHECK_SECONDS: running Spot workspaces whose VM Azure
    evicted become stopped (see workspaces.evictions). Returns how many. Azure not answering
    is logged; the next run asks again."""
    try:
        return len(workspace_evictions_detect(now=timezone.now()).evicted)
    except CloudError as exc:
        log.warning("Spot eviction check: Azure did not answer (%s): %s", exc.code, exc.message)
        return 0


@shared_task
def idle_sweep() -> dict[str, int]:
    """Beat, every IDLE_SWEEP_SECONDS: warn, tell and stop by the teams' idle policies."""
    result = sweep(now=timezone.now())
    return {
        "evaluated": result.evaluated,
        "warned": len(result.warned),
        "stopped": len(result.stopped),
        "skipped": result.skipped,
    }


@shared_task
def downsample_telemetry() -> int:
    """Beat, hourly: fold raw samples older than TELEMETRY_RAW_HOURS into hourly rows."""
    return telemetry_downsample(now=timezone.now())


@shared_task
def namespace_activity() -> int:
    """Beat, every AGENT_INTERVAL_SECONDS: the idle evidence of running namespace workspaces
    (running pods requesting GPUs; see workspaces.kube_activity). Returns samples stored."""
    return namespace_activity_scan(now=timezone.now())


@shared_task
def leaver_recheck(team_id: int, user_id: int, reason: str) -> None:
    """Once, LEAVER_RECHECK_SECONDS after a leave: the team's leaver policy applied again to
    the leaver's workspaces that were provisioning or starting then (workspaces.leavers)."""
    leaver_workspaces_apply(
        team_id=team_id, user_id=user_id, reason=reason, now=timezone.now(), recheck=False
    )
