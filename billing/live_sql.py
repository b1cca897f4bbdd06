"""Today's spend priced inside PostgreSQL, for the spend pages at fleet scale.

A team's live window (its day so far, after the rollup mark) holds a line per workspace and
meter: thousands for a large fleet. Read into Python, pricing and ranking them cost most of
the spend page's time. On PostgreSQL, whose numeric type is exact, the lines are priced in
SQL instead (``day_lines``), and the page's sums and top workspaces are taken there too
(``month_ranking``), so a page reads a few dozen rows. SQLite has no exact decimal type, so
there billing.live_spend prices the same sums in Python.

A line's cost is microseconds x USD/hour x share_num, exact, divided by share_den x 3.6e9 at
50 decimal places, then rounded to the cent half up (ROUND here, metering.to_cents in
Python). The hourly price is Price's (a monthly price over 730 hours to 20 places, as
metering.monthly_to_hourly), and the Python pricing (metering.cost_of) also multiplies
exactly and divides once, so both give the same cent, and a cost that is exactly half a cent
rounds up on both databases.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import (
    Case,
    DateTimeField,
    DecimalField,
    DurationField,
    ExpressionWrapper,
    Func,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.expressions import Combinable
from django.db.models.functions import Coalesce, Greatest, Least

from billing import metering
from billing.models import MonthSpend, Price, UsageInterval

Windows = dict[int, tuple[datetime, datetime]]  # per team id: aware (start, end)
# (team_id, workspace_id, kind, meter, microseconds allocated in the window, USD exact)
DayLine = tuple[int, UUID, str, str, Decimal, Decimal]
# (workspace_id, team_id, kind, rolled compute hours, live compute microseconds, USD)
RankedRow = tuple[UUID, int, str, Decimal, Decimal, Decimal]

_GROUPED = (
    "team_id", "workspace_id", "kind", "meter", "price_kind", "sku", "region", "spot",
    "share_num", "share_den", "price_per_hour",
)  # fmt: skip


def available() -> bool:
    """Whether the database prices in SQL: PostgreSQL (exact numeric)."""
    return connection.vendor == "postgresql"


def _teams_by_window(windows: Windows) -> dict[tuple[datetime, datetime], list[int]]:
    teams: dict[tuple[datetime, datetime], list[int]] = defaultdict(list)
    for team, window in windows.items():
        teams[window].append(team)
    return teams


def _bound(windows: Windows, n: int) -> Value | Case:
    """SQL: the start (0) or end (1) of each UsageInterval's team's window."""
    teams_by_window = _teams_by_window(windows)
    if len(teams_by_window) == 1:  # the usual page: one team, or teams in one time zone
        return Value(next(iter(teams_by_window))[n], output_field=DateTimeField())
    return Case(
        *(When(team_id__in=ts, then=Value(w[n])) for w, ts in teams_by_window.items()),
        output_field=DateTimeField(),
    )


def clipped(windows: Windows) -> Combinable:
    """SQL: a UsageInterval's time within its team's window ``{team_id: (start, end)}`` (an
    open interval runs to the window's end). Teams sharing a window share its terms."""
    start, end = _bound(windows, 0), _bound(windows, 1)
    return Least(Coalesce("ended_at", end), end) - Greatest("started_at", start)


class _Microseconds(Func):
    """PostgreSQL: an interval in microseconds, exact (EXTRACT gives numeric seconds; an
    interval's day counts 86,400 s, as the timestamps' difference it came from)."""

    template = "(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)"
    output_field = DecimalField()


_LINES = """
WITH g AS ({grouped}),
rated AS MATERIALIZED (  -- once per distinct price, not once per sum
    SELECT k.*, COALESCE((
        SELECT CASE WHEN p.unit = %s THEN p.unit_price
                    ELSE ROUND(CAST(p.unit_price AS numeric(80, 60)) / %s, %s) END
        FROM {price} p
        WHERE p.kind = k.price_kind AND p.sku = k.sku AND p.region = k.region
          AND p.spot = k.spot AND p.effective_start <= k.window_start
        ORDER BY p.effective_start DESC LIMIT 1
    ), k.price_per_hour) AS rate
    FROM (SELECT DISTINCT price_kind, sku, region, spot, price_per_hour, window_start, window_end
          FROM g) AS k
    WHERE NOT EXISTS (
        SELECT 1 FROM {price} p
        WHERE p.kind = k.price_kind AND p.sku = k.sku AND p.region = k.region
          AND p.spot = k.spot AND p.effective_start > k.window_start
          AND p.effective_start < k.window_end
    )
)
SELECT g.team_id, g.workspace_id, g.kind, g.meter, SUM(g.micro) AS micro,
       SUM(CAST(g.micro * r.rate * g.share_num AS numeric(200, 50))
           / (g.share_den * 3600000000)) AS cost
FROM g JOIN rated r
  ON g.price_kind = r.price_kind AND g.sku = r.sku AND g.region = r.region AND g.spot = r.spot
 AND g.price_per_hour = r.price_per_hour
 AND g.window_start = r.window_start AND g.window_end = r.window_end
GROUP BY g.team_id, g.workspace_id, g.kind, g.meter
"""


def _lines(queryset: QuerySet[UsageInterval], windows: Windows) -> tuple[str, list[Any]]:
    """SQL and params of day_lines. The intervals are first summed per workspace, meter and
    price (microseconds, exact); each distinct price is looked up once, as
    billing.pricing.price_book and metering.price_at do in Python: the Price in effect at
    the window's start (hourly, or monthly over 730 hours at 20 places, as
    metering.monthly_to_hourly), else the price quoted when the interval opened; a price
    that changes inside the window is left to the caller; then each sum is priced, so the
    exact division runs once per sum rather than once per interval."""
    bounds = {"window_start": _bound(windows, 0), "window_end": _bound(windows, 1)}
    allocated = Sum(ExpressionWrapper(clipped(windows), output_field=DurationField()))
    grouped = (
        queryset.annotate(**bounds)
        .values_list(*_GROUPED, *bounds)
        .annotate(micro=_Microseconds(allocated))
        .order_by()
    )
    sql, params = grouped.query.sql_with_params()
    hourly = [metering.HOURLY_UNIT, metering.HOURS_PER_MONTH, metering.HOURLY_PLACES]
    return _LINES.format(grouped=sql, price=Price._meta.db_table), [*params, *hourly]


def day_lines(queryset: QuerySet[UsageInterval], windows: Windows) -> list[DayLine]:
    """Per team, workspace, kind and meter, the UsageInterval rows of ``queryset`` (those
    overlapping each team's one-day window ``{team_id: (start, end)}``) whose price does not
    change inside the window: [(team_id, workspace_id, kind, meter, microseconds allocated
    within the window, USD exact)]. One query."""
    sql, params = _lines(queryset, windows)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        lines: list[DayLine] = cursor.fetchall()
    return lines


_RANKING = """
WITH line AS ({lines}),
live AS (
    SELECT team_id, workspace_id, kind,
           SUM(CASE WHEN meter = 'compute' THEN micro ELSE 0 END) AS micro,
           SUM(ROUND(cost, 2)) AS cost
    FROM line GROUP BY team_id, workspace_id, kind
),
rolled AS (
    SELECT team_id, workspace_id, kind, hours, cost FROM {monthspend} WHERE {rolled}
),
joined AS (
    SELECT COALESCE(r.workspace_id, l.workspace_id) AS workspace_id,
           COALESCE(r.team_id, l.team_id) AS team_id, COALESCE(r.kind, l.kind) AS kind,
           COALESCE(r.hours, 0) AS hours, COALESCE(l.micro, 0) AS micro,
           COALESCE(r.cost, 0) + COALESCE(l.cost, 0) AS cost
    FROM rolled r FULL JOIN live l ON r.workspace_id = l.workspace_id
)
SELECT NULL, team_id, kind, NULL, NULL, SUM(cost), NULL FROM live GROUP BY team_id, kind
UNION ALL
(SELECT workspace_id, team_id, kind, hours, micro, cost, COUNT(*) OVER ()
 FROM joined ORDER BY cost DESC, workspace_id LIMIT %s)
"""


def month_ranking(
    queryset: QuerySet[UsageInterval], windows: Windows, rolled: list[tuple[int, date]], top: int
) -> tuple[dict[tuple[int, str], Decimal], list[RankedRow], int]:
    """The day_lines of ``queryset`` rounded to the cent and summed per team and kind, and with
    the rolled-up month (MonthSpend of each (team, month) in ``rolled``) per workspace:
    ({(team, kind): USD}, [(workspace_id, team_id, kind, rolled compute hours, live compute
    microseconds, USD)] the ``top`` costliest, how many workspaces spent). One query."""
    sql, params = _lines(queryset, windows)
    months: dict[date, list[int]] = defaultdict(list)  # one condition per month, not per team
    for team, month in rolled:
        months[month].append(team)
    where = " OR ".join(["(month = %s AND team_id = ANY(%s))"] * len(months)) or "FALSE"
    query = _RANKING.format(lines=sql, rolled=where, monthspend=MonthSpend._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(query, [*params, *(v for pair in months.items() for v in pair), top])
        rows = cursor.fetchall()
    kinds: dict[tuple[int, str], Decimal] = {}
    ranked: list[RankedRow] = []
    count = 0
    for workspace, team, kind, hours, micro, cost, spent in rows:
        if workspace is None:
            kinds[(team, kind)] = cost
        else:
            ranked.append((workspace, team, kind, hours, micro, cost))
            count = spent
    return kinds, ranked, count
