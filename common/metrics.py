"""The portal's own Prometheus counters and histograms, and the beat jobs' last-run marks.

Counters and histograms are prometheus-client's; in multiprocess mode (PROMETHEUS_MULTIPROC_DIR
set before the first import of prometheus_client, as the Procfile and the Helm chart do) every
web, worker and beat process writes them to files in that directory and ``/metrics``
(portal/metrics.py) adds them up at scrape time. Gauges that describe the database (workspaces,
GPUs, spend, the queue) are not here: they are computed at scrape time by portal/metrics.py.

The beat jobs' last runs go to the Django cache (CACHE_URL: Redis in production), not to the
multiprocess files, because the worker that runs a job may be on another machine than the web
process that is scraped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

from django.core.cache import cache
from prometheus_client import Counter, Gauge, Histogram

REQUEST_SECONDS = Histogram(
    "portal_request_duration_seconds",
    "Latency of the portal's HTTP requests by view (URL route name), method and status class.",
    ["view", "method", "status"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
IDLE_ACTIONS = Counter(
    "portal_idle_actions_total",
    "What the idle sweep did: action=warned (stop warning sent), stopped (stopped for "
    "idleness), silence (owner told the agent is silent).",
    ["action"],
)
HEARTBEATS = Counter(
    "portal_heartbeats_total",
    "Agent heartbeats received by the portal, by outcome: taken, refused (any 4xx) or busy "
    "(503: the buffer is full or the database fails).",
    ["outcome"],
)
HEARTBEAT_SAMPLES = Counter(
    "portal_heartbeat_samples_total", "Telemetry samples taken from agent heartbeats."
)
# "livesum"/"livemin": only the processes alive count (portal/gunicorn_conf.py marks the dead).
HEARTBEAT_PENDING = Gauge(
    "portal_heartbeat_buffer_pending",
    "Heartbeats taken but not yet stored, in the web processes' buffers.",
    multiprocess_mode="livesum",
)
HEARTBEAT_OLDEST = Gauge(
    "portal_heartbeat_oldest_pending_timestamp_seconds",
    "Unix time at which the oldest heartbeat still waiting in a buffer was taken; +Inf when "
    "none waits. Its age is time() minus this.",
    multiprocess_mode="livemin",
)
HEARTBEAT_OLDEST.set(math.inf)
# Every series from 0, so that rate() and increase() see the first event.
for _action in ("warned", "stopped", "silence"):
    IDLE_ACTIONS.labels(_action)
for _outcome in ("taken", "refused", "busy"):
    HEARTBEATS.labels(_outcome)

BEAT_KEY = "metrics:beat-last-run:"


def heartbeat_buffer_state(*, pending: int, oldest: float | None) -> None:
    """Publish this process's buffer: ``pending`` heartbeats, the oldest taken at ``oldest``
    (Unix seconds; None when the buffer is empty)."""
    HEARTBEAT_PENDING.set(pending)
    HEARTBEAT_OLDEST.set(math.inf if oldest is None else oldest)


def beat_job_record(*, task: str, now: float | None = None) -> None:
    """Mark that the beat job ``task`` (its Celery task name) ran at ``now`` (Unix seconds)."""
    cache.set(BEAT_KEY + task, time.time() if now is None else now, None)


def beat_jobs_last_run(*, tasks: Iterable[str]) -> dict[str, float | None]:
    """{task name: Unix time it last ran, or None if never (since the cache was emptied)}; one
    cache round trip."""
    names = list(tasks)
    found = cache.get_many([BEAT_KEY + t for t in names])
    return {t: found.get(BEAT_KEY + t) for t in names}
