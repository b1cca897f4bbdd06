"""Each team's month so far in USD and GPU-hours, for /metrics (portal/metrics_collectors.py).

USD is the spend pages' own figure: billing.month_spend.month_sums over each team's month so far
in its time zone (rolled-up days plus today's lines priced live), the sum the spend page and the
platform admin's overview show. GPU-hours are each workspace's allocated hours from the same
sums times its GPU share (workspaces.gpus.gpu_share: a MIG slice counts as its sevenths, a
fractional VM as gpu_count / gpu_partition, a namespace as its GPU quota), as GPUs in use are
counted against quota.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from billing.month_spend import month_so_far, month_sums
from teams.selectors import team_timezones
from workspaces.gpus import gpu_share
from workspaces.models import Workspace

# Enough to rank every workspace: month_sums returns its ``top`` workspaces with their hours.
ALL_WORKSPACES = 10**9


@dataclass(frozen=True)
class TeamUsage:
    """A team's month so far: ``spent`` USD (cents), ``gpu_hours`` (GPU count x hours)."""

    spent: Decimal
    gpu_hours: Decimal


def team_month_usage(*, team_ids: Iterable[int], now: datetime) -> dict[int, TeamUsage]:
    """{team_id: TeamUsage} for the month so far of each team (its own time zone). Seven or
    eight queries whatever the number of teams or workspaces (month_sums' plus one for the
    workspaces' GPU shares)."""
    ids = list(team_ids)
    zones = team_timezones(team_ids=ids)
    sums = month_sums(month_so_far(ids, now, zones), now, zones, top=ALL_WORKSPACES)
    rows = Workspace.objects.filter(pk__in=[w.workspace_id for w in sums.top]).values(
        "pk", "team_id", "gpu_count", "gpu_slices", "gpu_partition"
    )
    shares = {
        r["pk"]: (
            r["team_id"],
            gpu_share(gpus=r["gpu_count"], slices=r["gpu_slices"], partition=r["gpu_partition"]),
        )
        for r in rows
    }
    hours: dict[int, Decimal] = defaultdict(Decimal)
    for ranked in sums.top:
        if ranked.workspace_id in shares:
            team, share = shares[ranked.workspace_id]
            hours[team] += ranked.hours * share.numerator / share.denominator
    return {t: TeamUsage(spent=sums.total(t), gpu_hours=hours[t]) for t in ids}
