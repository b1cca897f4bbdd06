"""The /metrics gauges computed at scrape time, from the database, the broker and the cache.

Each scrape asks the selectors the pages use, so /metrics and the pages agree: workspaces by kind
and status, GPUs in use (workspaces.selectors.team_gpus_in_use) and idle
(team_gpus_idle), the month's USD and GPU-hours per team (billing.month_usage, on
billing.month_spend's sums), the Celery queue, and the beat jobs' last runs. About 20 queries
whatever the number of workspaces or teams; benchmarks/metrics_scrape.py measures it.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

from celery.schedules import crontab, schedule
from django.conf import settings
from django.core.cache import cache
from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from billing.month_usage import TeamUsage, team_month_usage
from common.metrics import beat_jobs_last_run
from portal.celery import app
from teams.models import Team
from workspaces.backends import backends
from workspaces.models import Workspace
from workspaces.selectors import team_gpus_idle, team_gpus_in_use
from workspaces.states import Status

# A running workspace counts as idle once its agent saw no use for this long (the default idle
# policy's idle time: teams.models.IdlePolicy).
IDLE_AFTER = timedelta(minutes=30)
SPEND_CACHE_KEY = "metrics:team-month-usage"
SENT_AT_HEADER = "portal_sent_at"  # set on every task message by portal/celery.py


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class PortalCollector(Collector):
    """Yields every scrape-time gauge; ``now`` fixes the clock (tests, benchmarks)."""

    def __init__(self, *, now: datetime) -> None:
        self.now = now

    def collect(self) -> Iterator[Metric]:
        yield _workspaces()
        teams = {t.pk: t for t in Team.objects.only("pk", "slug", "monthly_budget")}
        yield from _gpus(teams, self.now)
        yield from _spend(teams, self.now)
        yield from _queue(self.now.timestamp())
        yield from _beat(self.now.timestamp())


def _workspaces() -> Metric:
    family = _gauge("portal_workspaces", "Workspaces by kind and status.", ["kind", "status"])
    counts = {
        (r["kind"], r["status"]): r["n"]
        for r in Workspace.objects.values("kind", "status").annotate(n=Count("pk")).order_by()
    }
    for kind in (backend.kind for backend in backends()):
        for status in Status.values:
            family.add_metric([kind, status], counts.get((kind, status), 0))
    return family


def _gpus(teams: dict[int, Team], now: datetime) -> Iterator[Metric]:
    used = team_gpus_in_use(team_ids=list(teams))
    idle = team_gpus_idle(quiet_since=now - IDLE_AFTER)
    by_model: dict[str, Fraction] = defaultdict(Fraction)
    per_team = _gauge(
        "portal_team_gpus_in_use",
        "GPUs a team holds against its quota now, by model (a MIG slice counts 1/7).",
        ["team", "gpu_model"],
    )
    for team_id, models in sorted(used.items()):
        for model, amount in sorted(models.items()):
            by_model[model] += amount
            per_team.add_metric([teams[team_id].slug, model], float(amount))
    total = _gauge("portal_gpus_in_use", "GPUs in use now, by model, all teams.", ["gpu_model"])
    for model, amount in sorted(by_model.items()):
        total.add_metric([model], float(amount))
    idle_family = _gauge(
        "portal_team_gpus_idle",
        f"GPUs of running workspaces whose agent saw no use for {IDLE_AFTER}, by team and model.",
        ["team", "gpu_model"],
    )
    for team_id, models in sorted(idle.items()):
        for model, amount in sorted(models.items()):
            if team_id in teams:
                idle_family.add_metric([teams[team_id].slug, model], float(amount))
    yield from (total, per_team, idle_family)


def _usage(team_ids: list[int], now: datetime) -> dict[int, TeamUsage]:
    """team_month_usage, kept METRICS_SPEND_CACHE_SECONDS in the cache (0: not kept): the
    month's sums cost most of a scrape (about 1 s with 10,000 workspaces) and move slowly,
    while Prometheus scrapes every 15-60 s, from every replica."""
    seconds = settings.METRICS_SPEND_CACHE_SECONDS
    usage: dict[int, TeamUsage] | None = cache.get(SPEND_CACHE_KEY) if seconds > 0 else None
    if usage is None or not set(team_ids) <= usage.keys():
        usage = team_month_usage(team_ids=team_ids, now=now)
        if seconds > 0:
            cache.set(SPEND_CACHE_KEY, usage, seconds)
    return usage


def _spend(teams: dict[int, Team], now: datetime) -> Iterator[Metric]:
    usage = _usage(list(teams), now)
    spent = _gauge("portal_team_month_spend_usd", "USD spent this month so far.", ["team"])
    hours = _gauge("portal_team_month_gpu_hours", "GPU-hours this month so far.", ["team"])
    budget = _gauge("portal_team_month_budget_usd", "The team's monthly budget, USD.", ["team"])
    ratio = _gauge(
        "portal_team_month_budget_used_ratio", "Spend this month / monthly budget.", ["team"]
    )
    for team_id, team in sorted(teams.items()):
        use = usage[team_id]
        spent.add_metric([team.slug], float(use.spent))
        hours.add_metric([team.slug], float(use.gpu_hours))
        if team.monthly_budget:
            budget.add_metric([team.slug], float(team.monthly_budget))
            ratio.add_metric([team.slug], float(use.spent / team.monthly_budget))
    yield from (spent, hours, budget, ratio)


def _queue(now: float) -> Iterator[Metric]:
    # The queue the worker consumes and tasks are sent to: Celery's own setting, read from
    # CELERY_TASK_DEFAULT_QUEUE when the app was configured.
    queue = str(app.conf.task_default_queue)
    state = _queue_state(queue)
    if state is None:
        return  # a broker we cannot look into: no figure rather than a broken scrape
    depth, oldest = state
    family = _gauge("portal_task_queue_depth", "Task messages waiting in the broker.", ["queue"])
    family.add_metric([queue], depth)
    yield family
    age = _gauge(
        "portal_task_queue_oldest_age_seconds",
        "Seconds since the oldest waiting task message was sent (0 when none waits).",
        ["queue"],
    )
    age.add_metric([queue], max(now - oldest, 0.0) if oldest is not None else 0.0)
    yield age


def _queue_state(queue: str) -> tuple[int, float | None] | None:
    """(messages waiting, Unix time the oldest was sent or None) of the broker's ``queue``;
    None for a broker other than the filesystem one or Redis (memory://, amqp://...)."""
    url = str(app.conf.broker_url)
    if url.startswith("filesystem://"):
        return _folder_state(queue)
    if not url.startswith(("redis://", "rediss://", "sentinel://")):
        return None
    with app.connection_for_read() as conn:
        client: Any = conn.default_channel.client
        # kombu's Redis transport LPUSHes and the worker takes from the right: the oldest
        # message is the list's last element.
        depth, last = client.llen(queue), client.lindex(queue, -1)
    return int(depth), _sent_at(last)


def _folder_state(queue: str) -> tuple[int, float | None]:
    # The oldest file by mtime is the oldest message; its age comes from the sent-at header
    # portal/celery.py wrote, on the sender's clock like the Redis path, not the file system's.
    folder = Path(str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]))
    files = []
    for path in folder.glob(f"*.{queue}.msg"):
        try:
            files.append((path.stat().st_mtime, path))
        except FileNotFoundError:
            continue  # taken by a worker meanwhile
    if not files:
        return 0, None
    mtime, oldest = min(files)
    try:
        sent = _sent_at(oldest.read_bytes())
    except FileNotFoundError:
        sent = None
    return len(files), mtime if sent is None else sent


def _sent_at(raw: bytes | None) -> float | None:
    if raw is None:
        return None
    try:
        sent = json.loads(raw).get("headers", {}).get(SENT_AT_HEADER)
        return float(sent) if sent is not None else None
    except (ValueError, TypeError, AttributeError):
        return None  # A message from before portal_sent_at, or not ours: no age to show.


def _beat(now: float) -> Iterator[Metric]:
    entries = app.conf.beat_schedule
    last = beat_jobs_last_run(tasks={e["task"] for e in entries.values()})
    ran = _gauge(
        "portal_beat_job_last_run_timestamp_seconds",
        "Unix time a beat job last ran on a worker (0: never, since the cache was emptied).",
        ["job"],
    )
    since = _gauge(
        "portal_beat_job_seconds_since_last_run",
        "Seconds since a beat job last ran (since the scrape process started, when never).",
        ["job"],
    )
    every = _gauge(
        "portal_beat_job_interval_seconds", "How often the beat schedule runs the job.", ["job"]
    )
    for job, entry in sorted(entries.items()):
        at = last.get(entry["task"])
        ran.add_metric([job], at or 0.0)
        since.add_metric([job], now - (at or _STARTED))
        every.add_metric([job], _interval(entry["schedule"]))
    yield from (ran, since, every)


def _interval(when: Any) -> float:
    """Seconds between runs: a number, a celery schedule, or a daily crontab (86400)."""
    if isinstance(when, int | float):
        return float(when)
    if isinstance(when, crontab):
        return 86400.0
    if isinstance(when, schedule):
        return float(when.run_every.total_seconds())
    return 0.0


_STARTED = time.time()
