"""Celery tasks: thin wrappers that pass ids to services."""

import logging
import time
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from cloud.errors import CloudError
from workspaces import services

log = logging.getLogger(__name__)


def retry_delay(*, attempt: int, retry_after: float | None) -> float:
    """Seconds before the next try: Azure's Retry-After when it gave one, else exponential
    back-off from 2 s, capped at 5 minutes."""
    if retry_after:
        return float(retry_after)
    return float(min(300, 2 ** (attempt + 1)))


@shared_task(bind=True, acks_late=True, max_retries=None)
def advance_workspace(self, workspace_id: str) -> None:
    """Run the Azure operation that the workspace's status owes (create, start, deallocate,
    delete), polling it every AZURE_POLLING_INTERVAL seconds by re-queueing itself rather than
    sleeping, so a VM create that takes minutes holds no worker. A requested workspace that
    waits for Azure quota or an unrestricted size is checked again every
    AZURE_PRECHECK_RETRY_SECONDS the same way. Transient Azure errors (429, 409 Conflict, 5xx)
    are retried with back-off up to WORKSPACE_RETRY_MAX times, then recorded as a failure."""
    step = _advance_once(self, workspace_id)
    # Eager mode (CELERY_TASK_ALWAYS_EAGER) has no broker to hold a countdown: poll in place.
    while step is services.Next.POLL and self.request.is_eager:
        time.sleep(settings.AZURE_POLLING_INTERVAL)
        step = _advance_once(self, workspace_id)
    if step is services.Next.POLL:
        advance_workspace.apply_async(
            args=[workspace_id], countdown=settings.AZURE_POLLING_INTERVAL
        )
    # Waiting can take hours: eager mode does not spin on it; the caller runs the task again.
    elif step is services.Next.WAIT and not self.request.is_eager:
        advance_workspace.apply_async(
            args=[workspace_id], countdown=settings.AZURE_PRECHECK_RETRY_SECONDS
        )
    elif step is services.Next.PENDING and not self.request.is_eager:
        advance_workspace.apply_async(
            args=[workspace_id], countdown=settings.KUBE_PENDING_RETRY_SECONDS
        )


def _advance_once(task, workspace_id: str) -> services.Next:
    try:
        return services.workspace_advance(workspace_id=workspace_id, clock=timezone.now)
    except CloudError as exc:
        if task.request.retries >= settings.WORKSPACE_RETRY_MAX:
            services.workspace_operation_failed(
                workspace_id=workspace_id, error=exc, now=timezone.now()
            )
            return services.Next.DONE
        delay = retry_delay(attempt=task.request.retries, retry_after=exc.retry_after)
        raise task.retry(exc=exc, countdown=delay) from exc


@shared_task(bind=True, acks_late=True, max_retries=None)
def refresh_slice_access(self, workspace_id: str) -> None:
    """Make a MIG slice's owner RoleBinding name its owner's Entra ID identity as it is now.
    Transient Kubernetes errors are retried with back-off up to WORKSPACE_RETRY_MAX times;
    anything else is logged, and the slice's next start applies the identity."""
    from workspaces import aks_services

    try:
        aks_services.slice_access_refresh(workspace_id=workspace_id)
    except CloudError as exc:
        if exc.transient and self.request.retries < settings.WORKSPACE_RETRY_MAX:
            delay = retry_delay(attempt=self.request.retries, retry_after=exc.retry_after)
            raise self.retry(exc=exc, countdown=delay) from exc
        log.warning("access to MIG workspace %s not refreshed: %s", workspace_id, exc)


@shared_task
def reconcile_workspaces() -> int:
    """Beat: re-queue workspaces whose operation task was lost. Returns how many."""
    stale = timedelta(seconds=settings.PORTAL_RECONCILE_INTERVAL * 2)
    return len(services.workspace_reconcile(now=timezone.now(), stale_after=stale))


@shared_task
def detect_spot_evictions() -> int:
    """Beat, every SPOT_EVICTION_CHECK_SECONDS: running Spot workspaces whose VM Azure
    evicted become stopped (see workspaces.evictions). Returns how many. Azure not answering
    is logged; the next run asks again."""
    from workspaces.evictions import workspace_evictions_detect

    try:
        return len(workspace_evictions_detect(now=timezone.now()).evicted)
    except CloudError as exc:
        log.warning("Spot eviction check: Azure did not answer (%s): %s", exc.code, exc.message)
        return 0


@shared_task
def idle_sweep() -> dict:
    """Beat, every IDLE_SWEEP_SECONDS: warn, tell and stop by the teams' idle policies."""
    from workspaces.sweep import idle_sweep as sweep

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
    from workspaces.telemetry import telemetry_downsample

    return telemetry_downsample(now=timezone.now())


@shared_task
def namespace_activity() -> int:
    """Beat, every AGENT_INTERVAL_SECONDS: the idle evidence of running namespace workspaces
    (running pods requesting GPUs; see workspaces.kube_activity). Returns samples stored."""
    from workspaces.kube_activity import namespace_activity_scan

    return namespace_activity_scan(now=timezone.now())
