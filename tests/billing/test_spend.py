"""Metering to the cent, worked by hand: intervals from state changes, priced at the Azure
price in effect at each moment, split by day in the team's time zone."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from billing import rollups as billing
from billing.csv_export import HEADER, spend_export
from billing.live_spend import spend_between
from billing.models import DailySpend, Price, UsageInterval
from billing.month_spend import spend_month, team_spend
from storage.models import ProvisionedSpan, TeamShare
from teams.models import IdlePolicy
from teams.selectors import team_timezones
from tests.factories import TeamFactory, WorkspaceFactory
from workspaces import states
from workspaces.states import Status

pytestmark = pytest.mark.django_db
A100 = "Standard_NC24ads_A100_v4"
T4 = "Standard_NC4as_T4_v3"


def price(sku, unit_price, start, *, kind="vm", unit="1 Hour", region="eastus", spot=False):
    return Price.objects.create(
        kind=kind,
        sku=sku,
        region=region,
        spot=spot,
        unit_price=Decimal(unit_price),
        unit=unit,
        effective_start=start,
        source="api",
        synced_at=start,
    )


def run(cast, *, start, stop=None, team=None, **fields):
    """A VM workspace provisioning from ``start`` and running; deallocated at ``stop``."""
    ws = WorkspaceFactory(team=team or cast.team, owner=cast.researcher, **fields)
    go = states.transition
    go(workspace_id=ws.pk, expected=Status.REQUESTED, to=Status.PROVISIONING, now=start)
    go(workspace_id=ws.pk, expected=Status.PROVISIONING, to=Status.RUNNING, now=start)
    if stop:
        go(workspace_id=ws.pk, expected=Status.RUNNING, to=Status.STOPPING, now=stop)
        go(workspace_id=ws.pk, expected=Status.STOPPING, to=Status.STOPPED, now=stop)
    return ws


def in_zone(cast, name):
    IdlePolicy.objects.update_or_create(team=cast.team, defaults={"timezone": name})


def lines_for(cast, first, last, now):
    zones = team_timezones(team_ids=[cast.team.pk])
    return spend_between(team_ids=[cast.team.pk], first=first, last=last, now=now, zones=zones)


def compute_by_day(lines):
    return {ln.day: ln.cost for ln in lines if ln.meter == "compute"}


def test_a_month_boundary_splits_the_spend_between_the_months(cast):
    price(A100, "3.6730", datetime(2026, 1, 1, tzinfo=UTC))
    start = datetime(2026, 10, 31, 22, 30, tzinfo=UTC)
    run(cast, start=start, stop=datetime(2026, 11, 1, 1, 15, tzinfo=UTC))
    now = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)

    by_day = compute_by_day(lines_for(cast, date(2026, 10, 31), date(2026, 11, 1), now))

    assert by_day == {date(2026, 10, 31): Decimal("5.5095"), date(2026, 11, 1): Decimal("4.59125")}
    # November so far: $4.59125 of compute + 45 min of the OS disk without a known price.
    assert team_spend(team_ids=[cast.team.pk], now=now)[cast.team.pk].spent == Decimal("4.59")


def test_a_day_with_the_autumn_dst_change_has_25_hours_in_the_teams_zone(cast):
    in_zone(cast, "Europe/Berlin")  # 25 Oct 2026: 03:00 CEST -> 02:00 CET
    price(A100, "2.00", datetime(2026, 1, 1, tzinfo=UTC))
    # Local midnight 25 Oct is 22:00 UTC on the 24th; local midnight 26 Oct is 23:00 UTC.
    run(cast, start=datetime(2026, 10, 24, 22, 0, tzinfo=UTC))
    now = datetime(2026, 10, 26, 0, 0, tzinfo=UTC)

    lines = lines_for(cast, date(2026, 10, 25), date(2026, 10, 25), now)

    assert compute_by_day(lines) == {date(2026, 10, 25): Decimal("50.00")}  # 25 h x $2
    assert [ln.hours for ln in lines if ln.meter == "compute"] == [Decimal(25)]


def test_a_price_change_mid_interval_bills_each_part_at_its_own_price(cast):
    price(A100, "3.00", datetime(2026, 11, 1, tzinfo=UTC))
    price(A100, "3.30", datetime(2026, 11, 10, 12, 0, tzinfo=UTC))
    run(
        cast,
        start=datetime(2026, 11, 10, 10, 0, tzinfo=UTC),
        stop=datetime(2026, 11, 10, 14, 0, tzinfo=UTC),
    )
    now = datetime(2026, 11, 11, tzinfo=UTC)

    by_day = compute_by_day(lines_for(cast, date(2026, 11, 10), date(2026, 11, 10), now))

    assert by_day == {date(2026, 11, 10): Decimal("12.60")}  # 2 h x $3.00 + 2 h x $3.30


def test_an_open_interval_is_billed_up_to_now_and_counts_in_the_burn_rate(cast):
    price(A100, "3.6730", datetime(2026, 1, 1, tzinfo=UTC))
    run(cast, start=datetime(2026, 11, 1, tzinfo=UTC))
    now = datetime(2026, 11, 1, 10, 20, tzinfo=UTC)

    spend = team_spend(team_ids=[cast.team.pk], now=now)[cast.team.pk]

    assert spend.spent == Decimal("37.95")  # 620 min / 60 x $3.6730 = $37.954333...
    assert spend.burn_per_hour == Decimal("3.6730")  # the disk has no price yet


def test_a_stopped_vm_still_pays_for_its_os_disk_until_it_is_deleted(cast):
    price("P10 LRS", "19.71", datetime(2026, 1, 1, tzinfo=UTC), kind="disk", unit="1/Month")
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    start = datetime(2026, 11, 2, tzinfo=UTC)
    ws = run(cast, start=start, stop=start + timedelta(hours=2))
    deleted = start + timedelta(days=1)
    states.transition(workspace_id=ws.pk, expected=Status.STOPPED, to=Status.DELETING, now=deleted)
    states.transition(workspace_id=ws.pk, expected=Status.DELETING, to=Status.DELETED, now=deleted)

    lines = lines_for(cast, date(2026, 11, 2), date(2026, 11, 3), deleted + timedelta(days=1))

    disk = {ln.day: ln.cost for ln in lines if ln.meter == "disk"}
    assert disk == {date(2026, 11, 2): Decimal("0.648")}  # 24 h x $19.71 / 730 h = 24 x $0.027
    assert compute_by_day(lines) == {date(2026, 11, 2): Decimal("6.00")}
    assert not UsageInterval.objects.filter(workspace=ws, ended_at=None).exists()


def test_the_rollup_gives_the_same_spend_as_live_and_is_idempotent(cast):
    price(A100, "3.00", datetime(2026, 11, 1, tzinfo=UTC))
    price(A100, "3.30", datetime(2026, 11, 3, 12, 0, tzinfo=UTC))
    run(cast, start=datetime(2026, 11, 1, 6, 0, tzinfo=UTC))
    now = datetime(2026, 11, 5, 9, 0, tzinfo=UTC)
    live = compute_by_day(lines_for(cast, date(2026, 11, 1), date(2026, 11, 5), now))

    first = billing.rollup_rebuild(now=now, team_ids=[cast.team.pk])
    again = billing.rollup_rebuild(now=now, team_ids=[cast.team.pk], since=date(2026, 11, 1))

    assert first == again == 8  # 4 complete days x (compute + disk)
    assert DailySpend.objects.filter(team=cast.team).count() == 8
    rolled = compute_by_day(lines_for(cast, date(2026, 11, 1), date(2026, 11, 5), now))
    assert rolled == live
    assert live[date(2026, 11, 3)] == Decimal("75.60")  # 12 h x $3.00 + 12 h x $3.30
    assert live[date(2026, 11, 5)] == Decimal("29.70")  # today so far: 9 h x $3.30, live


def test_a_late_price_correction_is_seen_at_once_and_rolled_up_again(cast):
    price(A100, "3.00", datetime(2026, 11, 1, tzinfo=UTC))
    run(cast, start=datetime(2026, 11, 1, tzinfo=UTC))
    now = datetime(2026, 11, 4, tzinfo=UTC)
    billing.rollup_rebuild(now=now, team_ids=[cast.team.pk])
    price(A100, "2.50", datetime(2026, 11, 2, tzinfo=UTC))

    billing.rollup_invalidate(since=datetime(2026, 11, 2, tzinfo=UTC))

    expected = {
        date(2026, 11, 1): Decimal("72.00"),
        date(2026, 11, 2): Decimal("60.00"),
        date(2026, 11, 3): Decimal("60.00"),
    }
    assert compute_by_day(lines_for(cast, date(2026, 11, 1), date(2026, 11, 3), now)) == expected
    billing.rollup_rebuild(now=now, team_ids=[cast.team.pk])
    assert compute_by_day(lines_for(cast, date(2026, 11, 1), date(2026, 11, 3), now)) == expected


def _share(team, start):
    """A 100 GiB team share Azure holds from ``start`` (storage.ProvisionedSpan)."""
    ProvisionedSpan.objects.create(
        team=team, share=TeamShare.objects.create(
            team=team, name="data", size_gib=100, azure_name="data", created_at=start
        ), label="share data", region="eastus", size_gib=100, started_at=start,
    )  # fmt: skip


def test_month_to_date_for_many_teams_takes_the_same_queries_as_for_one(
    cast, django_assert_num_queries
):
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    in_zone(cast, "Europe/Berlin")
    now = datetime(2026, 11, 5, tzinfo=UTC)
    for team in (cast.team, cast.other_team):
        run(cast, team=team, start=datetime(2026, 10, 31, 23, 30, tzinfo=UTC))
        _share(team, datetime(2026, 10, 1, tzinfo=UTC))
    billing.rollup_rebuild(now=now, team_ids=[cast.team.pk])
    # + 6: shares, bookings and their prices (billing.charges), for the month and the burn.
    with django_assert_num_queries(7 + 6):  # rolled up: only today is live, summed in SQL
        one = team_spend(team_ids=[cast.team.pk], now=now)
    with django_assert_num_queries(9 + 6):  # never rolled up: 1-5 Nov priced one by one
        both = team_spend(team_ids=[cast.team.pk, cast.other_team.pk], now=now)
    more = [TeamFactory() for _ in range(3)]
    for team in more:
        run(cast, team=team, start=datetime(2026, 11, 2, tzinfo=UTC))
        _share(team, datetime(2026, 11, 2, tzinfo=UTC))
    with django_assert_num_queries(9 + 6):
        team_spend(team_ids=[cast.team.pk, cast.other_team.pk, *(t.pk for t in more)], now=now)

    assert both[cast.team.pk] == one[cast.team.pk]
    # Berlin's November starts at 23:00 UTC on 31 Oct, so it holds all 96.5 h; UTC's, 96 h.
    assert both[cast.team.pk].spent == Decimal("289.50")
    assert both[cast.other_team.pk].spent == Decimal("288.00")


def again(ws, *, start, stop=None):
    """Start the stopped workspace at ``start``; stop it again at ``stop``."""
    go = states.transition
    go(workspace_id=ws.pk, expected=Status.STOPPED, to=Status.STARTING, now=start)
    go(workspace_id=ws.pk, expected=Status.STARTING, to=Status.RUNNING, now=start)
    if stop:
        go(workspace_id=ws.pk, expected=Status.RUNNING, to=Status.STOPPING, now=stop)
        go(workspace_id=ws.pk, expected=Status.STOPPING, to=Status.STOPPED, now=stop)


def test_today_is_priced_per_session_and_split_at_a_price_change_at_noon(cast):
    """Today (live, one local day) is summed per workspace and price in SQL, except a price
    whose change falls inside today, priced interval by interval; the next day's rollup
    prices the whole day."""
    in_zone(cast, "Europe/Berlin")  # 5 Nov there runs from 4 Nov 23:00 to 5 Nov 23:00 UTC
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    price(A100, "4.00", datetime(2026, 11, 5, 12, tzinfo=UTC))
    price(T4, "0.50", datetime(2026, 1, 1, tzinfo=UTC))
    day = datetime(2026, 11, 5, tzinfo=UTC)
    a = run(cast, start=day + timedelta(hours=8), stop=day + timedelta(hours=9))  # $3
    again(a, start=day + timedelta(hours=11), stop=day + timedelta(hours=13))  # $3 + $4
    again(a, start=day + timedelta(hours=17))  # open: $4 by 18:00, $24 by 23:00
    t4 = {"vm_size": T4, "price_per_hour": Decimal("0.526")}
    b = run(cast, start=day - timedelta(hours=2), stop=day + timedelta(hours=1), **t4)  # 2 h
    again(b, start=day + timedelta(hours=14), stop=day + timedelta(hours=16, minutes=30))
    now = day + timedelta(hours=18)
    billing.rollup_rebuild(now=now)  # through 4 Nov: 5 Nov is live

    today = lines_for(cast, date(2026, 11, 5), date(2026, 11, 5), now)
    billing.rollup_rebuild(now=now + timedelta(hours=6))  # 6 Nov 01:00 Berlin: 5 Nov rolls up
    rolled = DailySpend.objects.filter(day=date(2026, 11, 5), meter="compute")

    assert {ln.workspace_id: ln.cost for ln in today if ln.meter == "compute"} == {
        a.pk: Decimal("14.00"),
        b.pk: Decimal("2.25"),  # 2 h + 2.5 h at $0.50
    }
    assert {r.workspace_id: r.cost for r in rolled} == {
        a.pk: Decimal("34.00"),
        b.pk: Decimal("2.25"),
    }


def test_the_spend_page_reads_the_same_from_its_summaries_as_live_through_a_correction(cast):
    price(A100, "3.00", datetime(2026, 10, 1, tzinfo=UTC))
    a = run(
        cast,
        start=datetime(2026, 10, 30, 22, 0, tzinfo=UTC),
        stop=datetime(2026, 11, 2, 10, 0, tzinfo=UTC),
    )
    b = run(cast, start=datetime(2026, 11, 3, 8, 0, tzinfo=UTC))
    now = datetime(2026, 11, 5, 12, 0, tzinfo=UTC)

    def page(month=date(2026, 11, 1)):
        m = spend_month(team=cast.team, month=month, now=now)
        by_day = {day: kinds["vm"] for day, kinds in m.days if kinds["vm"]}
        return m.total, by_day, {w.workspace_id: (w.hours, w.cost) for w in m.workspaces}

    live = page()
    billing.rollup_rebuild(now=now, team_ids=[cast.team.pk])
    assert page() == live  # days 1-4 now come from the summaries, the 5th is live
    assert live == (
        Decimal("258.00"),
        {
            date(2026, 11, 1): Decimal("72.00"),  # a: 24 h x $3
            date(2026, 11, 2): Decimal("30.00"),  # a: 10 h
            date(2026, 11, 3): Decimal("48.00"),  # b: from 08:00, 16 h
            date(2026, 11, 4): Decimal("72.00"),
            date(2026, 11, 5): Decimal("36.00"),  # b: 12 h so far
        },
        {b.pk: (Decimal(52), Decimal("156.00")), a.pk: (Decimal(34), Decimal("102.00"))},
    )
    assert page(date(2026, 10, 1))[0] == Decimal("78.00")  # a: 26 h in October

    price(A100, "2.00", datetime(2026, 11, 3, tzinfo=UTC))
    billing.rollup_invalidate(since=datetime(2026, 11, 3, tzinfo=UTC))
    corrected = page()
    assert corrected[0] == Decimal("206.00")  # b's 52 h now at $2
    assert corrected[2][b.pk] == (Decimal(52), Decimal("104.00"))
    billing.rollup_rebuild(now=now, team_ids=[cast.team.pk])
    assert page() == corrected


def test_a_spot_vm_is_billed_at_the_spot_price_including_a_mid_interval_change(cast):
    price(A100, "3.6730", datetime(2026, 1, 1, tzinfo=UTC))  # pay-as-you-go: not this VM's
    price(A100, "0.7346", datetime(2026, 1, 1, tzinfo=UTC), spot=True)
    price(A100, "0.8125", datetime(2026, 11, 10, 12, 0, tzinfo=UTC), spot=True)
    start, evicted = (
        datetime(2026, 11, 10, 9, 30, tzinfo=UTC),
        datetime(2026, 11, 10, 15, 45, tzinfo=UTC),
    )
    ws = run(cast, start=start, spot=True, price_per_hour=Decimal("0.7346"))
    # Azure evicts it: running -> stopped in one step, which closes the compute meter.
    states.transition(workspace_id=ws.pk, expected=Status.RUNNING, to=Status.STOPPED, now=evicted)
    now = datetime(2026, 11, 11, tzinfo=UTC)

    by_day = compute_by_day(lines_for(cast, date(2026, 11, 10), date(2026, 11, 10), now))

    # 09:30-12:00 = 2.5 h x $0.7346 = $1.8365; 12:00-15:45 = 3.75 h x $0.8125 = $3.046875;
    # together $4.883375 (at pay-as-you-go it would have been 6.25 h x $3.673 = $22.95625).
    assert by_day == {date(2026, 11, 10): Decimal("4.883375")}
    assert UsageInterval.objects.get(workspace=ws, meter="compute").spot is True
    assert team_spend(team_ids=[cast.team.pk], now=now)[cast.team.pk].spent == Decimal("4.88")


def test_half_a_cent_rounds_up_live_in_the_csv_and_rolled_up(cast):
    """110 minutes at $0.21/hour is exactly $0.385: $0.39, rounded half up. (Pricing the hours
    first, 1.8333... h, made it $0.38499...: $0.38.)"""
    price(A100, "0.21", datetime(2026, 1, 1, tzinfo=UTC))
    day = datetime(2026, 11, 5, tzinfo=UTC)
    ws = run(cast, start=day + timedelta(hours=9), stop=day + timedelta(hours=10, minutes=50))
    now = day + timedelta(hours=12)
    billing.rollup_rebuild(now=now, since=date(2026, 11, 1))  # through 4 Nov: 5 Nov is live

    page = spend_month(team=cast.team, month=date(2026, 11, 1), now=now)
    csv = list(
        spend_export(teams=[cast.team], first=date(2026, 11, 5), last=date(2026, 11, 5), now=now)
    )
    billing.rollup_rebuild(now=now + timedelta(days=1))
    rolled = DailySpend.objects.get(day=date(2026, 11, 5), meter="compute")

    assert page.total == Decimal("0.39")
    assert [(w.workspace_id, w.cost) for w in page.workspaces] == [(ws.pk, Decimal("0.39"))]
    assert [row[HEADER.index("compute_usd")] for row in csv] == ["0.39"]
    assert rolled.cost == Decimal("0.39")


def test_the_page_ranks_workspaces_by_their_month_with_today_added(cast):
    """Today's live spend moves a workspace up the month's table; the rest are counted."""
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    nov = datetime(2026, 11, 1, tzinfo=UTC)
    a = run(cast, start=nov + timedelta(hours=8), stop=nov + timedelta(hours=18))  # $30
    b = run(cast, start=nov + timedelta(days=1, hours=8), stop=nov + timedelta(days=1, hours=10))
    run(cast, start=nov + timedelta(days=2, hours=8), stop=nov + timedelta(days=2, hours=9))
    again(b, start=nov + timedelta(days=4, hours=1))  # 5 Nov, open: $33 by 12:00
    now = nov + timedelta(days=4, hours=12)
    billing.rollup_rebuild(now=now)  # through 4 Nov: b's $6 and c's $3 rolled, today live

    page = spend_month(team=cast.team, month=date(2026, 11, 1), now=now, top=2)

    assert [(w.workspace_id, w.hours, w.cost) for w in page.workspaces] == [
        (b.pk, Decimal(13), Decimal("39.00")),  # 2 h rolled + 11 h today
        (a.pk, Decimal(10), Decimal("30.00")),
    ]
    assert page.more_workspaces == 1  # c, $3
    assert page.total == Decimal("72.00")
    assert page.days[4] == (
        date(2026, 11, 5),
        {"vm": Decimal("33.00"), "mig": 0, "namespace": 0, "storage": 0, "reservation": 0},
    )


def test_a_monthly_disk_price_is_billed_per_hour_over_730_hours_live_and_rolled_up(cast):
    """$1.54 a month is $0.00210958904109589041 an hour (730 hours, 20 places), the same in
    Python and, for today's lines on PostgreSQL, in SQL."""
    disk = price("P10 LRS", "1.54", datetime(2026, 1, 1, tzinfo=UTC), kind="disk", unit="1/Month")
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    day = datetime(2026, 11, 5, tzinfo=UTC)
    run(cast, start=day + timedelta(hours=8), stop=day + timedelta(hours=18))
    now = day + timedelta(hours=18)
    billing.rollup_rebuild(now=now, since=date(2026, 11, 1))  # through 4 Nov: 5 Nov is live

    today = {ln.meter: ln.cost for ln in lines_for(cast, date(2026, 11, 5), date(2026, 11, 5), now)}
    page = spend_month(team=cast.team, month=date(2026, 11, 1), now=now)
    billing.rollup_rebuild(now=now + timedelta(days=1))
    rolled = DailySpend.objects.get(day=date(2026, 11, 5), meter="disk")

    assert disk.hourly == Decimal("0.00210958904109589041")
    assert today == {"compute": Decimal("30"), "disk": Decimal("0.0210958904109589041")}  # 10 h
    assert page.total == Decimal("30.02")
    assert rolled.cost == Decimal("0.03")  # the stopped VM's disk to midnight: 16 h, $0.03375
