"""Reconciliation of the portal's estimate with Azure's actual cost (Cost Management, through
cloudsim): the nightly sync, the 2% flag, UTC days, the spend page, and who may see it."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from billing.actual_costs import actual_costs_sync, cost_estimates_store
from billing.models import ActualCost, ActualCostDay, EstimatedCost
from billing.price_sync import prices_sync
from billing.reconciliation import cost_comparison, cost_reconciliation
from billing.tasks import sync_actual_costs
from cloud.errors import CloudError
from cloud.prices import RetailPrice
from cloudsim.ledger import Usage
from portal.celery import app as celery_app
from tests.billing.test_spend import A100, in_zone, price, run
from tests.factories import TeamFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)
NOV_1, NOV_30 = date(2026, 11, 1), date(2026, 11, 30)
QUERY = "/providers/Microsoft.CostManagement/query"


def book_item(unit_price: float) -> dict:
    """The A100's pay-as-you-go price in eastus as the Retail Prices API lists it."""
    return {
        "currencyCode": "USD",
        "tierMinimumUnits": 0.0,
        "retailPrice": unit_price,
        "unitPrice": unit_price,
        "armRegionName": "eastus",
        "effectiveStartDate": "2026-01-01T00:00:00Z",
        "meterId": "a100-eastus",
        "meterName": "NC24ads A100 v4",
        "productName": "Virtual Machines NCads A100 v4 Series",
        "skuName": "NC24ads A100 v4",
        "serviceName": "Virtual Machines",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "armSkuName": A100,
    }


def bill(server, tags: dict, start: datetime, end: datetime | None = None) -> None:
    """Azure's side: an A100 VM with these tags was allocated from start to end (open: None)."""
    from django.conf import settings

    group = f"/subscriptions/{settings.AZURE_SUBSCRIPTION_ID}/resourceGroups/"
    usage = Usage(
        kind="vm",
        resource_id=f"{group}{settings.AZURE_RESOURCE_GROUP}/providers/x/{start.timestamp()}",
        subscription=settings.AZURE_SUBSCRIPTION_ID,
        resource_group=settings.AZURE_RESOURCE_GROUP,
        location="eastus",
        sku=A100,
        spot=False,
        start=start.timestamp(),
        tags=tags,
        end=end.timestamp() if end else None,
    )
    with server.state.lock:
        server.state.usages.append(usage)


@pytest.fixture
def both_sides(cast, sim, sim_server):
    """The same two workspaces on both sides at $3.00/h: one ran 10 h on 2 Nov, one runs since
    9 Nov 00:00 (to NOW, 10 Nov 12:00)."""
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    sim.set_prices([book_item(3.00)])
    done = run(
        cast,
        start=datetime(2026, 11, 2, 8, tzinfo=UTC),
        stop=datetime(2026, 11, 2, 18, tzinfo=UTC),
        name="finished",
    )
    running = run(cast, start=datetime(2026, 11, 9, tzinfo=UTC), name="training")
    nov_2 = datetime(2026, 11, 2, tzinfo=UTC)
    bill(
        sim_server,
        {"workspace": str(done.pk)},
        nov_2 + timedelta(hours=8),
        nov_2 + timedelta(hours=18),
    )
    bill(sim_server, {"workspace": str(running.pk)}, datetime(2026, 11, 9, tzinfo=UTC))
    return done, running


def stored() -> list[tuple]:
    return list(
        ActualCost.objects.order_by("day", "workspace_tag").values_list(
            "day", "workspace_tag", "workspace_id", "team_id", "cost"
        )
    )


# --- the sync ----------------------------------------------------------------------------------


@time_machine.travel(NOW, tick=False)
def test_the_sync_stores_azures_costs_per_workspace_and_utc_day(cast, both_sides, sim_server):
    done, running = both_sides
    bill(
        sim_server,
        {"team": "vision"},
        datetime(2026, 11, 3, tzinfo=UTC),
        datetime(2026, 11, 3, 1, tzinfo=UTC),
    )  # no workspace tag
    bill(
        sim_server,
        {"workspace": "someone-elses"},
        datetime(2026, 11, 3, tzinfo=UTC),
        datetime(2026, 11, 3, 2, tzinfo=UTC),
    )

    result = actual_costs_sync(now=NOW)

    assert (result.first, result.last) == (NOV_1, date(2026, 11, 10))
    assert stored() == [
        (date(2026, 11, 2), str(done.pk), done.pk, cast.team.pk, Decimal("30")),
        (date(2026, 11, 3), "", None, None, Decimal("3")),
        (date(2026, 11, 3), "someone-elses", None, None, Decimal("6")),
        (date(2026, 11, 9), str(running.pk), running.pk, cast.team.pk, Decimal("72")),
        (date(2026, 11, 10), str(running.pk), running.pk, cast.team.pk, Decimal("36")),
    ]
    assert (result.total, result.unattributed) == (Decimal("147"), Decimal("9"))
    assert ActualCostDay.objects.count() == 10
    assert set(ActualCostDay.objects.values_list("fetched_at", flat=True)) == {NOW}


@time_machine.travel(NOW, tick=False)
def test_a_second_sync_stores_the_same_and_leaves_older_days_alone(cast, both_sides, sim):
    october = ActualCost.objects.create(
        workspace_tag="old", day=date(2026, 10, 20), cost=Decimal("5"), fetched_at=NOW
    )
    actual_costs_sync(now=NOW)
    first = stored()

    again = actual_costs_sync(now=NOW)

    assert stored() == first and again.rows == len(first) - 1
    assert ActualCost.objects.filter(pk=october.pk).exists()


@time_machine.travel(NOW, tick=False)
def test_a_sync_replaces_what_azure_now_says(cast, both_sides, sim):
    done, running = both_sides
    actual_costs_sync(now=NOW)
    sim.skew_costs(tag=str(running.pk), multiplier="1.5")

    actual_costs_sync(now=NOW)

    costs = dict(ActualCost.objects.filter(workspace=running).values_list("day", "cost"))
    assert costs == {date(2026, 11, 9): Decimal("108"), date(2026, 11, 10): Decimal("54")}


@time_machine.travel(NOW, tick=False)
def test_a_failed_fetch_keeps_the_old_rows_and_estimates(cast, both_sides, sim):
    actual_costs_sync(now=NOW)
    before, estimated = stored(), estimates()
    sim.inject("cost.query", "throttle", count=3)  # past the client's 2 retries

    with pytest.raises(CloudError):
        actual_costs_sync(now=NOW + timedelta(days=1))

    assert stored() == before
    assert set(ActualCostDay.objects.values_list("fetched_at", flat=True)) == {NOW}
    assert estimates() == estimated
    assert set(EstimatedCost.objects.values_list("computed_at", flat=True)) == {NOW}


def estimates() -> dict[tuple, Decimal]:
    return {
        (e.workspace_id, e.day): e.cost
        for e in EstimatedCost.objects.order_by("day", "workspace_id")
    }


@time_machine.travel(NOW, tick=False)
def test_the_sync_stores_the_estimate_of_each_workspace_and_utc_day(cast, both_sides, sim):
    done, running = both_sides
    price("P10 LRS", "19.71", datetime(2026, 1, 1, tzinfo=UTC), kind="disk", unit="1/Month")

    actual_costs_sync(now=NOW)

    # A100 at $3.00/h; each OS disk at $19.71 / 730 h = $0.027/h from its first start until
    # deleted, so the finished VM's disk goes on after it stopped. Up to NOW, 10 Nov 12:00.
    disk_day = Decimal("0.648")
    assert estimates() == {
        (done.pk, date(2026, 11, 2)): Decimal("30.432"),  # 10 h of VM, 16 h of disk
        **{(done.pk, date(2026, 11, d)): disk_day for d in range(3, 10)},
        (running.pk, date(2026, 11, 9)): Decimal("72.648"),
        (done.pk, date(2026, 11, 10)): Decimal("0.324"),
        (running.pk, date(2026, 11, 10)): Decimal("36.324"),
    }
    assert set(EstimatedCost.objects.values_list("team_id", "computed_at")) == {(cast.team.pk, NOW)}


@time_machine.travel(NOW, tick=False)
def test_a_second_sync_replaces_the_estimates_of_its_days_only(cast, both_sides, sim):
    done, running = both_sides
    october = EstimatedCost.objects.create(
        team=cast.team, workspace=done, day=date(2026, 10, 20), cost=Decimal("5"), computed_at=NOW
    )
    actual_costs_sync(now=NOW)
    first = estimates()

    actual_costs_sync(now=NOW)
    assert estimates() == first

    later = NOW + timedelta(days=1)
    with time_machine.travel(later, tick=False):
        actual_costs_sync(now=later)
    running_days = {day: cost for (ws, day), cost in estimates().items() if ws == running.pk}
    assert running_days == {
        date(2026, 11, 9): Decimal("72"),
        date(2026, 11, 10): Decimal("72"),  # the whole day now, no longer half of it
        date(2026, 11, 11): Decimal("36"),
    }
    assert EstimatedCost.objects.get(pk=october.pk).cost == Decimal("5")


@time_machine.travel(NOW, tick=False)
def test_the_nightly_task_waits_out_throttling_and_stores(cast, both_sides, sim):
    sim.inject("cost.query", "throttle", count=3)

    sync_actual_costs.delay()

    assert ActualCost.objects.filter(team=cast.team).count() == 3
    queries = [r["status"] for r in sim.requests() if r["path"].endswith(QUERY)]
    # The client's 3 tries, then the task's retry: per workspace, then the teams' charges.
    assert queries == [429, 429, 429, 200, 200]


def test_the_task_is_on_the_one_beat_schedule_nightly():
    entry = celery_app.conf.beat_schedule["sync-actual-costs"]

    assert entry["task"] == "billing.tasks.sync_actual_costs"
    assert entry["schedule"].hour == {4}


@time_machine.travel(NOW, tick=False)
def test_the_command_syncs_and_says_what_it_stored(cast, both_sides, sim, capsys):
    call_command("sync_actual_costs", "--days", "12")

    out = capsys.readouterr().out
    assert "2026-10-29 to 2026-11-10 (UTC): 3 rows, $138.00" in out
    sim.inject("cost.query", "authorization_failed")
    with pytest.raises(CommandError, match="the old ones stay. AuthorizationFailed"):
        call_command("sync_actual_costs")
    assert ActualCost.objects.count() == 3


# --- the comparison ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("actual", "flagged"),
    [("102.00", False), ("102.01", True), ("98.00", False), ("97.99", True)],
)
def test_a_difference_over_two_percent_is_flagged_on_both_sides(actual, flagged):
    comparison = cost_comparison(estimate=Decimal("100.00"), actual=Decimal(actual))

    assert comparison.flagged is flagged
    assert comparison.difference == Decimal(actual) - 100


def test_with_no_estimate_any_actual_cost_is_flagged():
    assert cost_comparison(estimate=Decimal(0), actual=Decimal("0.01")).flagged
    assert cost_comparison(estimate=Decimal(0), actual=Decimal(0)).flagged is False
    assert cost_comparison(estimate=Decimal(0), actual=Decimal(1)).percent is None


def azure_says(workspace, day: date, cost: str, fetched: datetime) -> None:
    """Stored as a sync would: Azure's cost of the workspace's tag on a UTC day, and the
    portal's estimate of that day as of the fetch."""
    ActualCost.objects.create(
        team_id=workspace.team_id,
        workspace=workspace,
        workspace_tag=str(workspace.pk),
        day=day,
        cost=Decimal(cost),
        fetched_at=fetched,
    )
    ActualCostDay.objects.update_or_create(day=day, defaults={"fetched_at": fetched})
    cost_estimates_store(first=day, last=day, now=fetched)


@pytest.mark.parametrize(("actual", "flagged"), [("102.00", False), ("102.01", True)])
def test_the_flag_on_the_estimate_from_intervals(cast, actual, flagged):
    price(A100, "10.00", datetime(2026, 1, 1, tzinfo=UTC))
    start = datetime(2026, 11, 2, 8, tzinfo=UTC)
    ws = run(cast, start=start, stop=start + timedelta(hours=10))  # $100.00
    azure_says(ws, date(2026, 11, 2), actual, fetched=NOW)

    result = cost_reconciliation(team_ids=[cast.team.pk], first=NOV_1, last=NOV_30)

    (team,) = result.teams
    (row,) = team.workspaces
    assert (row.comparison.estimate, row.comparison.actual) == (Decimal("100"), Decimal(actual))
    assert row.comparison.flagged is team.comparison.flagged is flagged
    assert result.days == [date(2026, 11, 2)]


def test_days_are_utc_days_whatever_the_teams_time_zone(cast):
    in_zone(cast, "Europe/Berlin")  # 2 Nov 23:30 UTC is 3 Nov 00:30 there
    price(A100, "10.00", datetime(2026, 1, 1, tzinfo=UTC))
    start = datetime(2026, 11, 2, 23, 30, tzinfo=UTC)
    ws = run(cast, start=start, stop=start + timedelta(hours=1))
    azure_says(ws, date(2026, 11, 2), "5.00", fetched=datetime(2026, 11, 3, 6, tzinfo=UTC))

    result = cost_reconciliation(
        team_ids=[cast.team.pk], first=date(2026, 11, 2), last=date(2026, 11, 2)
    )

    comparison = result.teams[0].comparison
    assert (comparison.estimate, comparison.actual, comparison.flagged) == (5, 5, False)


def test_a_day_not_fetched_after_it_ended_is_not_compared(cast):
    price(A100, "10.00", datetime(2026, 1, 1, tzinfo=UTC))
    ws = run(cast, start=datetime(2026, 11, 10, tzinfo=UTC))
    azure_says(ws, date(2026, 11, 10), "40.00", fetched=NOW)  # 10 Nov was not over yet

    result = cost_reconciliation(team_ids=[cast.team.pk], first=NOV_1, last=NOV_30)

    assert not result.available and result.teams == []


def test_unattributed_cost_is_there_when_asked_for(cast):
    price(A100, "10.00", datetime(2026, 1, 1, tzinfo=UTC))
    ws = run(
        cast, start=datetime(2026, 11, 2, tzinfo=UTC), stop=datetime(2026, 11, 2, 1, tzinfo=UTC)
    )
    azure_says(ws, date(2026, 11, 2), "10.00", fetched=NOW)
    ActualCost.objects.create(
        workspace_tag="", day=date(2026, 11, 2), cost=Decimal("0.4321"), fetched_at=NOW
    )

    plain = cost_reconciliation(team_ids=[cast.team.pk], first=NOV_1, last=NOV_30)
    admin = cost_reconciliation(
        team_ids=[cast.team.pk], first=NOV_1, last=NOV_30, include_unattributed=True
    )

    assert plain.unattributed is None and admin.unattributed == Decimal("0.43")
    assert admin.teams[0].comparison.actual == Decimal("10.00")


def _queries(team_ids) -> int:
    with CaptureQueriesContext(connection) as queries:
        cost_reconciliation(team_ids=team_ids, first=NOV_1, last=NOV_30, include_unattributed=True)
    return len(queries)


def test_the_query_count_does_not_grow_with_teams_and_workspaces(cast):
    price(A100, "10.00", datetime(2026, 1, 1, tzinfo=UTC))
    start = datetime(2026, 11, 2, tzinfo=UTC)
    azure_says(run(cast, start=start), date(2026, 11, 2), "240", fetched=NOW)
    one = _queries([cast.team.pk])
    teams = [TeamFactory() for _ in range(3)]
    for team in teams:
        for _ in range(2):
            azure_says(run(cast, start=start, team=team), date(2026, 11, 2), "240", fetched=NOW)

    many = _queries([cast.team.pk, *(t.pk for t in teams)])

    assert one == many <= 5


# --- the page ----------------------------------------------------------------------------------


@time_machine.travel(NOW, tick=False)
def test_the_spend_page_shows_azures_cost_beside_the_estimate_and_marks_a_gap(
    client, cast, both_sides, sim
):
    done, running = both_sides
    sim.skew_costs(tag=str(running.pk), multiplier="1.05")
    actual_costs_sync(now=NOW)
    client.force_login(cast.researcher)

    page = panel(client, "team-spend", cast.team.slug)

    assert "Azure actual cost (Cost Management)" in page
    assert "9 UTC days from 1 Nov to 9 Nov 2026" in page  # 10 Nov is not over
    # training: 24 h on 9 Nov, $72.00 estimated, Azure $75.60 (+5.0%): flagged, and so is the
    # team ($102.00 against $105.60, +3.5%); finished agrees to the cent.
    assert 'class="sub flagged"' in page and "+$3.60 (+5.0%)" in page
    assert "$102.00</td>" in page and "$105.60</td>" in page
    assert page.count("Differs by more than 2%") == 2 and page.count("Within 2%") == 1


def panel(client, page: str, *args) -> str:
    """The reconciliation panel as the spend page ``page`` loads it: the page names the
    panel's URL, which htmx then fetches as a partial."""
    html = client.get(reverse(page, args=args)).content.decode()
    url = reverse(f"{page}-reconciliation", args=args)
    assert f'hx-get="{url}' in html and 'hx-trigger="load"' in html
    start = html.index(f'hx-get="{url}') + len('hx-get="')
    response = client.get(html[start : html.index('"', start)], headers={"HX-Request": "true"})
    assert response.status_code == 200
    return response.content.decode()


def reconciliation_section(client, cast) -> str:
    return panel(client, "team-spend", cast.team.slug)


@time_machine.travel(NOW, tick=False)
def test_the_page_shows_the_estimate_made_at_the_fetch_until_the_next_one(
    client, cast, both_sides, sim
):
    actual_costs_sync(now=NOW)
    late = run(  # usage of 3 Nov recorded after the fetch
        cast,
        start=datetime(2026, 11, 3, 8, tzinfo=UTC),
        stop=datetime(2026, 11, 3, 18, tzinfo=UTC),
        name="backfilled",
    )
    client.force_login(cast.researcher)

    page = reconciliation_section(client, cast)

    assert "the estimate was computed when Azure's costs were fetched" in page
    assert "10 Nov 12:00 UTC</time>" in page
    assert "$102.00</td>" in page and late.name not in page  # as of the fetch: 30 + 72
    actual_costs_sync(now=NOW)
    page = reconciliation_section(client, cast)
    assert "$132.00</td>" in page and late.name in page  # Azure billed nothing for it


def retail_a100(unit_price: str, start: datetime) -> RetailPrice:
    return RetailPrice(
        kind="vm",
        arm_sku_name=A100,
        region="eastus",
        spot=False,
        unit_price=Decimal(unit_price),
        unit="1 Hour",
        effective_start=start,
        meter_id="a100-eastus",
        product_name="Virtual Machines NCads A100 v4 Series",
        sku_name="NC24ads A100 v4",
        meter_name="NC24ads A100 v4",
    )


@time_machine.travel(NOW, tick=False)
def test_a_price_correction_prices_the_fetched_days_again_as_of_their_fetch(cast, both_sides, sim):
    done, running = both_sides
    actual_costs_sync(now=NOW)
    later = NOW + timedelta(hours=6)

    prices_sync(
        prices=[retail_a100("2.50", datetime(2026, 11, 9, tzinfo=UTC))], source="api", now=later
    )

    # The stopped VM's OS disk (no disk price here) is estimated at $0 a day.
    assert {key: cost for key, cost in estimates().items() if cost} == {
        (done.pk, date(2026, 11, 2)): Decimal("30"),  # before the correction: as it was
        (running.pk, date(2026, 11, 9)): Decimal("60"),  # 24 h x $2.50
        (running.pk, date(2026, 11, 10)): Decimal("30"),  # 12 h up to the fetch, not to later
    }
    result = cost_reconciliation(team_ids=[cast.team.pk], first=NOV_1, last=NOV_30)
    comparison = result.teams[0].comparison
    assert (comparison.estimate, comparison.actual) == (Decimal("90"), Decimal("102"))
    assert comparison.flagged  # Azure still charges $3.00


@time_machine.travel(NOW, tick=False)
def test_before_any_sync_the_page_says_azures_cost_is_not_in(client, cast, both_sides):
    client.force_login(cast.team_admin)

    page = panel(client, "team-spend", cast.team.slug)

    assert "is not in for these days yet" in page and "Differs by more" not in page


@time_machine.travel(NOW, tick=False)
def test_an_outsider_gets_404(client, cast, both_sides, sim):
    actual_costs_sync(now=NOW)
    client.force_login(cast.outsider)

    assert client.get(reverse("team-spend", args=[cast.team.slug])).status_code == 404
    url = reverse("team-spend-reconciliation", args=[cast.team.slug])
    assert client.get(url, headers={"HX-Request": "true"}).status_code == 404


@time_machine.travel(NOW, tick=False)
def test_the_platform_admin_sees_every_teams_gap_and_what_azure_could_not_attribute(
    client, cast, both_sides, sim
):
    done, running = both_sides
    sim.skew_costs(tag=str(running.pk), multiplier="1.05")
    actual_costs_sync(now=NOW)
    ActualCost.objects.create(
        workspace_tag="", day=date(2026, 11, 2), cost=Decimal("0.4321"), fetched_at=NOW
    )
    client.force_login(cast.platform_admin)

    page = panel(client, "platform-spend")

    assert "Azure actual cost (Cost Management)" in page and "+$3.60 (+5.0%)" in page
    assert "Not attributed to a workspace" in page and "$0.43" in page


@time_machine.travel(NOW, tick=False)
def test_without_htmx_the_panel_is_a_page_of_its_own_and_a_bad_month_gets_400(
    client, cast, both_sides, sim
):
    actual_costs_sync(now=NOW)
    client.force_login(cast.researcher)
    url = reverse("team-spend-reconciliation", args=[cast.team.slug])

    page = client.get(url, {"month": "2026-11"}).content.decode()
    bad = client.get(url, {"month": "2026-13"})

    assert "<html" in page and "Estimate against Azure actual cost" in page
    assert "$102.00</td>" in page
    assert bad.status_code == 400 and "error" in bad.json()


@time_machine.travel(NOW, tick=False)
def test_a_team_lists_its_top_workspaces_the_flagged_first_and_counts_the_rest(cast):
    price(A100, "10.00", datetime(2026, 1, 1, tzinfo=UTC))
    start = datetime(2026, 11, 2, 8, tzinfo=UTC)
    costs = {"small-off": "12.00", "big-ok": "100.00", "mid-ok": "50.00", "tiny-off": "1.50"}
    hours = {"small-off": 1, "big-ok": 10, "mid-ok": 5, "tiny-off": 0.1}
    for name, actual in costs.items():
        ws = run(cast, start=start, stop=start + timedelta(hours=hours[name]), name=name)
        azure_says(ws, date(2026, 11, 2), actual, fetched=NOW)

    def top(n: int):
        (team,) = cost_reconciliation(
            team_ids=[cast.team.pk], first=NOV_1, last=NOV_30, top=n
        ).teams
        return [row.name for row in team.workspaces], team.more, team.more_flagged

    assert top(3) == (["small-off", "tiny-off", "big-ok"], 1, 0)
    assert top(1) == (["small-off"], 3, 1)
    assert top(None) == (["small-off", "tiny-off", "big-ok", "mid-ok"], 0, 0)


@time_machine.travel(NOW, tick=False)
def test_untagged_cost_azure_sends_with_a_null_tag_value_shows_as_not_attributed(
    cast, sim_server, sim, client
):
    # Cost Management answers untagged cost as [cost, day, "workspace", null, "USD"]; one such
    # row used to fail the whole sync. It is stored and shown as not attributed.
    bill(
        sim_server,
        {"team": "vision"},
        datetime(2026, 11, 3, tzinfo=UTC),
        datetime(2026, 11, 3, 1, tzinfo=UTC),
    )

    result = actual_costs_sync(now=NOW)

    # 1 h of the A100 at the emulator's book price, $3.673, all of it untagged.
    assert (result.total, result.unattributed) == (Decimal("3.673"), Decimal("3.673"))
    client.force_login(cast.platform_admin)
    page = client.get(reverse("platform-spend-reconciliation"), headers={"HX-Request": "true"})
    assert page.status_code == 200
    assert 'data-testid="unattributed">$3.67<' in page.content.decode()
