"""What each workspace used of its GPUs over the right-sizing window, from its telemetry
folded per UTC hour (workspaces.models.TelemetryHour, current to the last complete hour:
workspaces.telemetry.telemetry_downsample folds the recent hours early). Raw samples are not
read: 48 hours of them at a 30 s interval are 5,760 rows per workspace.

Two paths give the same figures: on PostgreSQL one query aggregates every workspace in SQL
(``percentile_cont``, an ordered-set aggregate SQLite lacks); elsewhere the hours are read
and aggregated in Python by ``usage_of_hours``, the reference, which a test checks the SQL
against on the same data. Per workspace, over the hours with telemetry in the window:

- ``hours``: hours with telemetry (the agent reports while the workspace runs);
- ``peak_mib``: the fullest single GPU (or MIG device) of any sample, MiB;
- ``p95_mib``: the 95th percentile (linear interpolation, as ``percentile_cont``) of each
  hour's fullest GPU, MiB: what it needs in 95 % of its hours;
- ``total_peak_mib``: the most memory used over all its GPUs at once, MiB;
- ``memory_mib``: its GPUs' memory as NVML reports it (per GPU or MIG device), MiB;
- ``gpus_in_use``: the most GPUs holding at least 1 GiB at once;
- ``util_mean``: GPU utilisation, percent, the mean of the samples (hourly means weighted by
  their samples); None when NVML gave none;
- ``idle_hours``: hours whose GPU utilisation stayed under IDLE_UTIL_PERCENT with nobody
  logged in (no SSH session, no busy Jupyter kernel);
- ``busy_hours`` and ``unattended_hours``: hours at or over IDLE_UTIL_PERCENT, and those of
  them with nobody logged in (batch work: right-sizing's Spot signal).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction

from workspaces.models import HOUR_FIGURES, TelemetryHour
from workspaces.states import Status

IDLE_UTIL_PERCENT = 5
P95 = 0.95
GONE = (Status.DELETING, Status.DELETED)  # workspaces given no advice


@dataclass(frozen=True)
class Usage:
    """One workspace's GPU use over the window (see the module's docstring for each figure)."""

    hours: int
    peak_mib: int | None
    p95_mib: int | None
    total_peak_mib: int | None
    memory_mib: int | None
    gpus_in_use: int
    util_mean: float | None
    idle_hours: int
    busy_hours: int
    unattended_hours: int


@dataclass(frozen=True)
class HourRow:
    """One TelemetryHour's figures (see its model); ``util_avg`` the hour's mean utilisation,
    percent."""

    workspace_id: Any
    samples: int
    util_avg: int | None
    util_max: int | None
    interactive_max: int
    mem_max: int | None
    mem_sum: int | None
    mem_total: int | None
    in_use: int | None


def usage_measure(*, since: datetime, until: datetime, min_hours: int) -> dict[Any, Usage]:
    """{workspace id: Usage} of every workspace not deleted with at least ``min_hours``
    hours of telemetry in [since, until) (UTC hours). One query."""
    if connection.vendor == "postgresql":
        return usage_sql(since=since, until=until, min_hours=min_hours)
    return usage_python(since=since, until=until, min_hours=min_hours)


def usage_python(*, since: datetime, until: datetime, min_hours: int) -> dict[Any, Usage]:
    """The reference path: the hours read into Python (one query), then usage_of_hours."""
    per_workspace: dict[Any, list[HourRow]] = defaultdict(list)
    for row in _hour_rows(since, until):
        per_workspace[row.workspace_id].append(row)
    return {
        ws: usage_of_hours(rows) for ws, rows in per_workspace.items() if len(rows) >= min_hours
    }


def _hour_rows(since: datetime, until: datetime) -> Iterable[HourRow]:
    hours = TelemetryHour.objects.filter(hour__gte=since, hour__lt=until)
    folded = hours.exclude(workspace__status__in=GONE).values_list("workspace_id", *HOUR_FIGURES)
    for values in folded.iterator(chunk_size=5000):
        yield HourRow(*values)


def usage_of_hours(rows: list[HourRow]) -> Usage:
    """The Usage of one workspace's hour rows (pure; the reference the SQL must equal)."""
    mems = sorted(r.mem_max for r in rows if r.mem_max is not None)
    weighted = [(r.util_avg * r.samples, r.samples) for r in rows if r.util_avg is not None]
    weight = sum(n for _, n in weighted)
    idle = [_idle(r.util_max) and r.interactive_max == 0 for r in rows]
    busy = [not _idle(r.util_max) for r in rows]
    return _usage(
        hours=len(rows),
        peak=mems[-1] if mems else None,
        p95=percentile_cont(mems, P95),
        total_peak=max((r.mem_sum for r in rows if r.mem_sum is not None), default=None),
        memory=max((r.mem_total for r in rows if r.mem_total), default=None),
        in_use=max((r.in_use or 0 for r in rows), default=0),
        util=sum(s for s, _ in weighted) / weight if weight else None,
        idle=sum(idle),
        busy=sum(busy),
        unattended=sum(1 for r, b in zip(rows, busy, strict=True) if b and r.interactive_max == 0),
    )


def _idle(util_max: int | None) -> bool:
    return util_max is None or util_max < IDLE_UTIL_PERCENT


def percentile_cont(values: list[int], fraction: float) -> float | None:
    """PostgreSQL's ``percentile_cont(fraction)`` of the sorted ``values``: linear
    interpolation between the two nearest ranks; None of no values."""
    if not values:
        return None
    position = fraction * (len(values) - 1)
    low = math.floor(position)
    high = math.ceil(position)
    return values[low] + (values[high] - values[low]) * (position - low)


def _usage(**f: Any) -> Usage:
    """Both paths round here alike: MiB to whole MiB, the mean to 0.1 %."""
    return Usage(
        hours=f["hours"],
        peak_mib=f["peak"],
        p95_mib=None if f["p95"] is None else round(f["p95"]),
        total_peak_mib=f["total_peak"],
        memory_mib=f["memory"],
        gpus_in_use=f["in_use"],
        util_mean=None if f["util"] is None else round(float(f["util"]), 1),
        idle_hours=f["idle"],
        busy_hours=f["busy"],
        unattended_hours=f["unattended"],
    )


# Per workspace not deleted, its hours in the window by an index-only scan of
# TelemetryHour's covering index (telemetryhour_figures): a range of ~720 entries, no heap
# page, no sort. One GROUP BY over all the hours instead would need them sorted by workspace,
# and PostgreSQL's planner, taking the heap as cached, reads them through the narrower
# foreign-key index, a random heap page per row (21 s for 7.2 million hours).
_SQL = """
SELECT w.id, a.*
  FROM workspaces_workspace w
 CROSS JOIN LATERAL (
    SELECT count(*) AS hours,
           max(gpu_mem_max_mib),
           percentile_cont(%(p)s) WITHIN GROUP (ORDER BY gpu_mem_max_mib),
           max(gpu_mem_sum_mib),
           max(nullif(gpu_mem_total_mib, 0)),
           coalesce(max(gpus_in_use_max), 0),
           sum(gpu_util_avg::float8 * samples)
               / nullif(sum(samples) FILTER (WHERE gpu_util_avg IS NOT NULL), 0),
           count(*) FILTER (WHERE coalesce(gpu_util_max, 0) < %(idle)s AND interactive_max = 0),
           count(*) FILTER (WHERE gpu_util_max >= %(idle)s),
           count(*) FILTER (WHERE gpu_util_max >= %(idle)s AND interactive_max = 0)
      FROM workspaces_telemetryhour h
     WHERE h.workspace_id = w.id AND h.hour >= %(since)s AND h.hour < %(until)s
 ) a
 WHERE w.status <> ALL(%(gone)s) AND a.hours >= %(min_hours)s
"""


def usage_sql(*, since: datetime, until: datetime, min_hours: int) -> dict[Any, Usage]:
    """The same figures as usage_python, aggregated by PostgreSQL in one query."""
    params: dict[str, datetime | float | int | list[str]] = {
        "since": since,
        "until": until,
        "p": P95,
        "idle": IDLE_UTIL_PERCENT,
        "min_hours": min_hours,
        "gone": [status.value for status in GONE],
    }
    with transaction.atomic(), connection.cursor() as cursor:
        # JIT compiling this once-a-day query costs about 0.4 s and saves less.
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(_SQL, params)
        rows = cursor.fetchall()
    keys = [
        "hours",
        "peak",
        "p95",
        "total_peak",
        "memory",
        "in_use",
        "util",
        "idle",
        "busy",
        "unattended",
    ]
    return {row[0]: _usage(**dict(zip(keys, row[1:], strict=True))) for row in rows}
