"""The fast spend paths against the one reference pricing (billing.pricing.spend_reference) on
the same varied data: today's lines summed and priced in SQL (PostgreSQL: billing.live_sql;
SQLite: clipped in SQL, priced in Python), and the month's totals and top workspaces ranked in
SQL, must give the reference's cents. Data from a fixed seed: teams in four time zones
(one with a 30-minute DST shift), VM, MIG and namespace workspaces with shares, hourly and
monthly (disk) prices, keys without any Price row, and prices changing inside the window."""

import random
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from billing.live_spend import intervals_of, live_spend, live_windows
from billing.metering import to_cents
from billing.models import Price, SpendRollup, UsageInterval
from billing.month_spend import spend_month
from billing.overview import spend_overview
from billing.pricing import book_key, price_book, spend_reference
from teams.models import IdlePolicy
from teams.selectors import team_timezones
from tests.factories import TeamFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 24, 18, 7, 13, 417_203, tzinfo=UTC)
ZONES = ("UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe")
VM_SIZES = ("Standard_NC24ads_A100_v4", "Standard_NC4as_T4_v3", "Standard_NV36ads_A10_v5")
REGIONS = ("eastus", "westeurope")
SHARES = ((1, 1), (1, 7), (2, 7), (3, 7), (1, 2))


def _price(rng, kind, sku, region, spot, start, unit="1 Hour"):
    cents = rng.randint(5, 900_000) if unit == "1 Hour" else rng.randint(500, 4_000_000)
    Price.objects.create(
        kind=kind,
        sku=sku,
        region=region,
        spot=spot,
        unit_price=Decimal(cents) / 10_000,
        unit=unit,
        effective_start=start,
        source="api",
        synced_at=start,
    )


def _prices(rng, *, changing: bool):
    """A price for most meters since January; some change within the last day (inside some
    teams' windows, before others'); the Spot A10 in westeurope has no Price row at all."""
    for sku in VM_SIZES:
        for region in REGIONS:
            for spot in (False, True):
                if (sku, region, spot) == (VM_SIZES[2], "westeurope", True):
                    continue
                _price(rng, "vm", sku, region, spot, datetime(2026, 1, 1, tzinfo=UTC))
                if changing and rng.random() < 0.4:
                    moment = NOW - timedelta(seconds=rng.randint(60, 30 * 3600))
                    _price(rng, "vm", sku, region, spot, moment)
    for region in REGIONS:
        _price(rng, "disk", "P10 LRS", region, False, datetime(2026, 1, 1, tzinfo=UTC), "1/Month")


def _intervals(rng, workspace, kind: str, n: int) -> None:
    """``n`` sessions one after another from up to 40 hours ago, the last maybe still open,
    and for most VMs an OS disk billed from the first."""
    sku, region = rng.choice(VM_SIZES), rng.choice(REGIONS)
    spot = rng.random() < 0.3
    share = (1, 1) if kind == "vm" else rng.choice(SHARES)
    first = start = NOW - timedelta(microseconds=rng.randint(1, 40 * 3_600_000_000))
    fields = dict(workspace=workspace, team=workspace.team, kind=kind)
    for n_left in range(n - 1, -1, -1):
        end = start + timedelta(microseconds=rng.randint(1, 9 * 3_600_000_000))
        if end >= NOW or (n_left == 0 and rng.random() < 0.4):
            end = None
        UsageInterval.objects.create(
            **fields, meter="compute", price_kind="vm", sku=sku, region=region, spot=spot,
            share_num=share[0], share_den=share[1], started_at=start, ended_at=end,
            price_per_hour=Decimal(rng.randint(1, 60_000)) / 10_000,
        )  # fmt: skip
        if end is None:
            break
        start = end + timedelta(seconds=rng.randint(1, 3 * 3600))
        if start >= NOW:
            break
    if kind == "vm" and rng.random() < 0.7:
        UsageInterval.objects.create(
            **fields, meter="disk", price_kind="disk", sku="P10 LRS", region=region,
            started_at=first, ended_at=None, price_per_hour=Decimal("0.0263"),
        )  # fmt: skip


def _fleet(seed: int, *, changing: bool) -> list:
    """Four teams, one per zone, with 20 workspaces each, rolled up through yesterday (their
    time zone), so their live window is today so far: the spend pages' usual case."""
    rng = random.Random(seed)
    _prices(rng, changing=changing)
    teams = []
    for n, zone in enumerate(ZONES):
        team = TeamFactory(name=f"Team {n}", slug=f"team-{n}")
        IdlePolicy.objects.update_or_create(team=team, defaults={"timezone": zone})
        yesterday = NOW.astimezone(team_timezones(team_ids=[team.pk])[team.pk]).date()
        SpendRollup.objects.create(
            team=team, rolled_through=yesterday - timedelta(days=1), rebuilt_at=NOW
        )
        for _ in range(20):
            kind = rng.choice(("vm", "vm", "mig", "namespace"))
            _intervals(rng, WorkspaceFactory(team=team), kind, rng.randint(1, 5))
        teams.append(team)
    return teams


def _today(teams) -> tuple[dict, dict]:
    zones = team_timezones(team_ids=[t.pk for t in teams])
    days = {t.pk: (NOW.astimezone(zones[t.pk]).date(),) * 2 for t in teams}
    return live_windows(days, {}, NOW, zones), zones


def _reference(teams):
    windows, zones = _today(teams)
    intervals = intervals_of(UsageInterval.objects.all())
    book = price_book(book_key(i) for i in intervals)
    return spend_reference(intervals=intervals, book=book, windows=windows, zones=zones)


def _by_line(lines) -> dict:
    """{(team, workspace, kind, day, meter): (hours to the microsecond-hour, USD to the cent)}"""
    return {
        (ln.team_id, ln.workspace_id, ln.kind, ln.day, ln.meter): (
            ln.hours.quantize(Decimal("0.000001")),
            to_cents(ln.cost),
        )
        for ln in lines
        if ln.hours
    }


@pytest.mark.parametrize("changing", [False, True], ids=["steady-prices", "prices-change-today"])
@pytest.mark.parametrize("seed", [17, 1729])
def test_todays_lines_priced_in_sql_match_the_reference(seed, changing):
    teams = _fleet(seed, changing=changing)
    windows, zones = _today(teams)

    fast = _by_line(live_spend(windows=windows, zones=zones))
    reference = _by_line(_reference(teams))

    assert len(reference) > 80  # the data is varied enough to mean something
    assert fast == reference


@pytest.mark.parametrize("seed", [17, 1729])
def test_the_month_totals_and_ranking_match_the_reference(seed):
    teams = _fleet(seed, changing=False)
    spent: dict[int, Decimal] = defaultdict(Decimal)
    by_workspace: dict = defaultdict(Decimal)
    for line in _reference(teams):
        spent[line.team_id] += to_cents(line.cost)  # the CSV's cents, line by line
        by_workspace[line.workspace_id] += to_cents(line.cost)

    overview = spend_overview(teams=teams, now=NOW, top=20)
    page = spend_month(team=teams[1], month=date(2026, 11, 1), now=NOW)

    assert {row.team.pk: row.spent for row in overview.teams} == {t.pk: spent[t.pk] for t in teams}
    costliest = sorted(by_workspace.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
    assert [(w.workspace_id, w.cost) for w in overview.workspaces] == costliest
    assert page.total == spent[teams[1].pk]
    assert sum(costs[k] for _, costs in page.days for k in costs) == spent[teams[1].pk]
