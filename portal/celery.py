"""The Celery app, the one beat schedule, and the signals /metrics reads."""

import gc
import os
import time
from typing import Any

from celery import Celery
from celery.schedules import crontab
from celery.signals import (
    before_task_publish,
    task_postrun,
    worker_init,
    worker_process_init,
    worker_shutdown,
)
from django.conf import settings
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
# filesystem:// (the embedded default) through our transport: kombu's lets a worker read a
# message file before it is written. Other schemes (redis://) are untouched.
TRANSPORT_ALIASES["filesystem"] = "portal.kombu_filesystem:Transport"

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _beat_schedule(sender: Celery, **kwargs: Any) -> None:
    sender.conf.beat_schedule = {
        "reconcile-workspaces": {
            "task": "workspaces.tasks.reconcile_workspaces",
            "schedule": settings.PORTAL_RECONCILE_INTERVAL,
        },
        "reconcile-node-pools": {
            "task": "clusters.tasks.reconcile_pools",
            "schedule": settings.PORTAL_RECONCILE_INTERVAL,
        },
        "advance-bookings": {
            "task": "bookings.tasks.advance_bookings",
            "schedule": settings.BOOKING_TICK_SECONDS,
        },
        "idle-sweep": {
            "task": "workspaces.tasks.idle_sweep",
            "schedule": settings.IDLE_SWEEP_SECONDS,
        },
        "namespace-activity": {
            "task": "workspaces.tasks.namespace_activity",
            "schedule": settings.AGENT_INTERVAL_SECONDS,
        },
        "spot-evictions": {
            "task": "workspaces.tasks.detect_spot_evictions",
            "schedule": settings.SPOT_EVICTION_CHECK_SECONDS,
        },
        "downsample-telemetry": {
            "task": "workspaces.tasks.downsample_telemetry",
            "schedule": 3600.0,
        },
        "rollup-spend": {
            "task": "billing.tasks.rollup_spend",
            "schedule": settings.SPEND_ROLLUP_SECONDS,
        },
        "budget-alerts": {
            "task": "teams.tasks.check_budget_alerts",
            "schedule": settings.SPEND_ALERT_SECONDS,
        },
        "retry-webhook-deliveries": {
            "task": "teams.tasks.retry_webhook_deliveries",
            "schedule": 60.0,
        },
        "sync-actual-costs": {
            "task": "billing.tasks.sync_actual_costs",
            "schedule": crontab(hour=settings.ACTUAL_COSTS_SYNC_HOUR, minute=20),  # UTC
        },
        # Right-sizing reads 30 days of telemetry: once a day is fresh enough, after the hourly
        # downsample; the digest goes to team admins on Monday morning (UTC).
        "refresh-recommendations": {
            "task": "billing.tasks.refresh_recommendations",
            "schedule": crontab(hour=4, minute=40),  # UTC
        },
        "savings-digest": {
            "task": "billing.tasks.send_savings_digest",
            "schedule": crontab(day_of_week="mon", hour=7, minute=0),  # UTC
        },
        "entra-sync": {
            "task": "teams.tasks.entra_sync",
            "schedule": settings.ENTRA_SYNC_SECONDS,
        },
        "queue-pass": {
            "task": "scheduling.tasks.run_queue_pass",
            "schedule": settings.QUEUE_PASS_SECONDS,
        },
        "autostarts": {
            "task": "scheduling.tasks.run_autostarts",
            "schedule": 60.0,
        },
        "queue-claims": {
            "task": "scheduling.tasks.expire_queue_claims",
            "schedule": 60.0,
        },
        "expire-quota-requests": {
            "task": "teams.tasks.expire_quota_requests",
            "schedule": 600.0,
        },
        # Team shares: scheduled snapshots (each team says how often) and deleted shares past
        # their soft-delete retention (docs/storage.md).
        "storage-snapshots": {
            "task": "storage.tasks.scheduled_snapshots",
            "schedule": 900.0,
        },
        "storage-purge": {
            "task": "storage.tasks.purge_deleted_volumes",
            "schedule": 3600.0,
        },
    }


@before_task_publish.connect
def _stamp_sent_at(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    """Stamp each task message with its send time (Unix seconds), from which /metrics tells
    the age of the oldest waiting task (portal/metrics_collectors.py)."""
    if headers is not None:
        headers.setdefault("portal_sent_at", time.time())


@task_postrun.connect
def _beat_job_ran(sender: object = None, **kwargs: Any) -> None:
    """Mark when a beat job last ran (common.metrics.beat_job_record), for /metrics' time
    since each beat job ran: in the cache, shared by every worker."""
    name = getattr(sender, "name", None)
    if name and name in {entry["task"] for entry in app.conf.beat_schedule.values()}:
        from common.metrics import beat_job_record  # the app registry is ready in a worker

        beat_job_record(task=name)


@worker_process_init.connect
def _pool_process_group(**kwargs: Any) -> None:
    """Move a prefork pool process into a process group of its own, so that a SIGTERM to the
    worker's group (honcho's stop in `make run`, Heroku-like supervisors) reaches only the
    worker's main process, which then stops its pool cleanly (a warm shutdown). A pool process
    killed by that SIGTERM while it held the pool's queue lock left the main process waiting
    on the lock until honcho's SIGKILL. Celery already has the kernel SIGKILL the pool
    processes if the main process dies (prctl PDEATHSIG), so none outlives it."""
    os.setpgid(0, 0)


@worker_shutdown.connect
def _skip_last_collection(sender: object = None, **kwargs: Any) -> None:
    """Once a `celery worker` command has stopped (pool joined, acknowledgements sent), freeze
    its objects, so that the interpreter's last garbage collection at exit skips them: that
    collection, over everything a worker imports (Django, the Azure SDKs, the Kubernetes
    client), took 1.5-2.5 s on a busy 2-core machine, enough to push a stop past honcho's
    5 s. The memory goes back to the OS at exit all the same. Not for a worker embedded in
    another process (the tests' in-process worker), whose objects must stay collectable."""
    # Loaded only as a worker stops; the web process never needs it.
    from celery.apps.worker import Worker

    if isinstance(sender, Worker):
        gc.freeze()


@worker_init.connect
def _serve_worker_metrics(**kwargs: Any) -> None:
    """With METRICS_WORKER_PORT set, serve this worker's counters (idle actions, Azure and
    Kubernetes calls) on that port for Prometheus, for a worker that shares no
    PROMETHEUS_MULTIPROC_DIR with the web process (a pod of its own on AKS). That port has no
    token: keep it inside the cluster's network (docs/operations.md, "Metrics")."""
    port = os.environ.get("METRICS_WORKER_PORT", "").strip()
    if not port:
        return
    # Loaded only where the worker serves its metrics.
    from prometheus_client import REGISTRY, CollectorRegistry, multiprocess, start_http_server

    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    start_http_server(
        int(port), addr=os.environ.get("METRICS_WORKER_ADDR", "0.0.0.0"), registry=registry
    )
