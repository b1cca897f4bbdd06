"""The Celery app and the one beat schedule."""

import os

from celery import Celery
from celery.schedules import crontab
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
# filesystem:// (the embedded default) through our transport: kombu's lets a worker read a
# message file before it is written. Other schemes (redis://) are untouched.
TRANSPORT_ALIASES["filesystem"] = "portal.kombu_filesystem:Transport"

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _beat_schedule(sender, **kwargs):
    from django.conf import settings

    sender.conf.beat_schedule = {
        "reconcile-workspaces": {
            "task": "workspaces.tasks.reconcile_workspaces",
            "schedule": settings.PORTAL_RECONCILE_INTERVAL,
        },
        "reconcile-node-pools": {
            "task": "clusters.tasks.reconcile_pools",
            "schedule": settings.PORTAL_RECONCILE_INTERVAL,
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
        "expire-quota-requests": {
            "task": "teams.tasks.expire_quota_requests",
            "schedule": 600.0,
        },
    }
