"""Storage and capacity reservations in the team's money (billing.charges), worked by hand to
the cent: a share billed per provisioned GiB-month from the Retail Prices API's Premium Files
meter, a held booking billed as its instances running, both in spend, burn, forecast and the
chargeback CSV beside compute."""

import io
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.urls import reverse

from billing import actual_costs, metering
from billing.charges import charge_burn_rate, charge_lines, unused_pieces
from billing.csv_export import HEADER, spend_export
from billing.models import ActualCost, ActualCostDay, Price, UsageInterval
from billing.month_spend import spend_month, team_spend
from billing.reconciliation import cost_reconciliation
from bookings.models import Booking, BookingSeat, BookingState
from cloud.costs import ActualCost as AzureCost
from storage.models import ProvisionedSpan, TeamShare
from teams.selectors import team_timezones
from tests.factories import WorkspaceFactory

pytestmark = pytest.mark.django_db
A100 = "Standard_NC24ads_A100_v4"
NOV = datetime(2026, 11, 1, tzinfo=UTC)


@pytest.fixture
def priced(db):
    """The repository's offline price book (data/retail_prices_snapshot.json), as synced."""
    call_command("sync_prices", "--offline", stdout=io.StringIO())


def share(cast, gib, start, end=None, name="datasets"):
    row = TeamShare.objects.create(
        team=cast.team, name=name, size_gib=gib, azure_name=name, created_at=start
    )
    return ProvisionedSpan.objects.create(
        team=cast.team, share=row, label=f"share {name}", region="eastus", size_gib=gib,
        started_at=start, ended_at=end,
    )  # fmt: skip


def booking(cast, instances, held, released=None, quoted="3.6730"):
    return Booking.objects.create(
        team=cast.team, created_by=cast.researcher, title="Lab 3", region="eastus",
        vm_size=A100, gpu_model="A100", instances=instances, gpus=instances, vcpus=24 * instances,
        price_per_hour=Decimal(quoted), starts_at=held + timedelta(minutes=30), ends_at=released
        or held + timedelta(hours=8), hold_from=held, state=BookingState.HELD, held_at=held,
        released_at=released, created_at=held, updated_at=held,
    )  # fmt: skip


def test_the_price_book_has_the_premium_files_meters_of_the_retail_prices_api(priced):
    files = Price.objects.filter(kind="files", region__in=["eastus", "eastus2"])

    assert sorted(files.values_list("region", "sku", "unit_price", "unit")) == [
        ("eastus", "Premium LRS Provisioned", Decimal("0.16"), "1 GB/Month"),
        ("eastus", "Premium LRS Snapshots", Decimal("0.136"), "1 GB/Month"),
        ("eastus2", "Premium LRS Provisioned", Decimal("0.16"), "1 GB/Month"),
        ("eastus2", "Premium LRS Snapshots", Decimal("0.136"), "1 GB/Month"),
    ]


def test_a_1_tib_share_costs_163_84_a_730_hour_month(cast, priced):
    share(cast, 1024, NOV)
    now = NOV + timedelta(hours=730)
    zones = team_timezones(team_ids=[cast.team.pk])

    lines = charge_lines(windows={cast.team.pk: (NOV, now)}, zones=zones)

    # 1024 GiB x $0.16 per GiB-month = $163.84 over Azure's 730-hour month, prorated by hour.
    assert round(sum(ln.cost for ln in lines), 2) == Decimal("163.84")
    assert {ln.meter for ln in lines} == {"storage"} and all(ln.priced for ln in lines)


def test_a_share_is_in_the_month_a_day_at_a_time_to_the_cent(cast, priced):
    share(cast, 1024, NOV - timedelta(days=3))  # existing before the month, still there

    month = spend_month(
        team=cast.team, month=date(2026, 11, 1), now=datetime(2026, 12, 2, tzinfo=UTC)
    )

    # A day: 1024 GiB x 24 h x $0.16/730 = $5.3865 -> $5.39; 30 days = $161.70.
    assert {costs["storage"] for _, costs in month.days} == {Decimal("5.39")}
    assert month.total == Decimal("161.70")


def test_a_deleted_share_stops_costing_and_a_stopped_workspace_does_not_stop_it(cast, priced):
    share(cast, 100, NOV, NOV + timedelta(hours=10))
    now = NOV + timedelta(days=1)

    spent = team_spend(team_ids=[cast.team.pk], now=now)[cast.team.pk]

    assert spent.spent == Decimal("0.22")  # 100 GiB x 10 h x $0.16/730 = $0.219
    assert spent.burn_per_hour == 0


def test_a_held_reservation_costs_its_instances_used_or_not(cast, priced):
    held = NOV + timedelta(hours=8, minutes=30)
    booking(cast, 2, held, held + timedelta(hours=8, minutes=30))
    share(cast, 1024, NOV)
    now = NOV + timedelta(hours=12)

    spent = team_spend(team_ids=[cast.team.pk], now=now)[cast.team.pk]

    # Reservation so far: 2 x $3.673 x 3.5 h = $25.711 -> $25.71; the share 12 h x 1024 GiB x
    # $0.16/730 = $2.693 -> $2.69. Burning now: 2 x $3.673 + 1024 x $0.16/730.
    assert spent.spent == Decimal("28.40")
    assert round(spent.burn_per_hour, 4) == Decimal("7.5704")


def test_a_booked_vm_in_the_reservation_is_billed_once_as_the_vm(cast, priced):
    # Microsoft Learn: "Once in use, you pay for only the VM". 2 reserved 08:30-16:30; a booked
    # VM runs in it 09:00-13:00 (its compute meter); one already running before the hold is
    # outside the reservation and changes nothing.
    held = NOV + timedelta(hours=8, minutes=30)
    b = booking(cast, 2, held, held + timedelta(hours=8))
    inside = WorkspaceFactory(team=cast.team, owner=cast.researcher, vm_size=A100)
    outside = WorkspaceFactory(team=cast.team, owner=cast.researcher, vm_size=A100)
    for ws, start, end in (
        (inside, NOV + timedelta(hours=9), NOV + timedelta(hours=13)),
        (outside, NOV + timedelta(hours=7), NOV + timedelta(hours=12)),
    ):
        BookingSeat.objects.create(booking=b, workspace=ws, owner=cast.researcher, created_at=NOV)
        UsageInterval.objects.create(
            workspace=ws, team=cast.team, kind="vm", sku=A100, region="eastus",
            started_at=start, ended_at=end, price_per_hour=Decimal("3.6730"),
        )  # fmt: skip
    zones = team_timezones(team_ids=[cast.team.pk])
    window = {cast.team.pk: (NOV, NOV + timedelta(days=1))}

    lines = charge_lines(windows=window, zones=zones)

    # 16 reserved VM-hours, 4 of them the booked VM's: 12 unused, at $3.673.
    assert sum(ln.hours * ln.quantity for ln in lines) == Decimal(12)
    assert metering.to_cents(sum(ln.cost for ln in lines)) == Decimal("44.08")
    at_ten = NOV + timedelta(hours=10)
    assert charge_burn_rate(team_ids=[cast.team.pk], now=at_ten)[cast.team.pk] == Decimal(
        "3.6730"
    )  # one unused instance burns while the booked VM runs


def test_unused_pieces_follow_the_vms_allocated_in_the_hold():
    held, hour = NOV, timedelta(hours=1)
    assert unused_pieces(held=held, released=None, instances=2, in_use=[]) == [(held, None, 2)]
    pieces = unused_pieces(
        held=held,
        released=held + 8 * hour,
        instances=2,
        in_use=[(held + hour, held + 3 * hour), (held + 2 * hour, None), (held - hour, None)],
    )
    assert pieces == [
        (held, held + hour, 2),
        (held + hour, held + 2 * hour, 1),
        (held + 3 * hour, held + 8 * hour, 1),
    ]  # both allocated 2-3 h: nothing unused; one from 3 h; the one before the hold: outside


def test_the_chargeback_csv_has_a_line_per_share_and_booking_a_day(cast, priced):
    held = NOV + timedelta(hours=8, minutes=30)
    booking(cast, 2, held, held + timedelta(hours=8, minutes=30))  # as quoted: $62.44
    share(cast, 1024, NOV)
    now = NOV + timedelta(days=2)

    rows = list(
        spend_export(teams=[cast.team], first=date(2026, 11, 1), last=date(2026, 11, 1), now=now)
    )
    month = spend_month(team=cast.team, month=date(2026, 11, 1), now=now)

    col = {name: [row[HEADER.index(name)] for row in rows] for name in HEADER}
    assert col["kind"] == ["reservation", "storage"]
    assert (
        col["workspace"][0].startswith("booking Lab 3 (")
        and col["workspace"][1] == "share datasets"
    )
    assert col["reservation_usd"] == ["62.44", "0.00"] and col["storage_usd"] == ["0.00", "5.39"]
    assert col["compute_hours"] == ["17.00", "0.00"]  # 2 VMs x 8.5 h, billed as running
    assert month.days[0][1]["reservation"] + month.days[0][1]["storage"] == Decimal("67.83")


def test_a_share_without_a_known_price_costs_nothing_rather_than_a_guess(cast, priced):
    row = share(cast, 1024, NOV)
    ProvisionedSpan.objects.filter(pk=row.pk).update(region="westus3")  # no captured price
    zones = team_timezones(team_ids=[cast.team.pk])

    lines = charge_lines(windows={cast.team.pk: (NOV, NOV + timedelta(hours=5))}, zones=zones)

    assert [(ln.cost, ln.priced) for ln in lines] == [(Decimal(0), False)]


def test_a_booking_never_held_costs_nothing(cast, priced):
    b = booking(cast, 2, NOV)
    Booking.objects.filter(pk=b.pk).update(held_at=None, state=BookingState.FAILED)

    assert (
        team_spend(team_ids=[cast.team.pk], now=NOV + timedelta(hours=5))[cast.team.pk].spent == 0
    )


def test_the_storage_page_says_what_the_shares_cost_a_month(client, cast, priced):
    share(cast, 1024, NOV - timedelta(days=1))
    client.force_login(cast.researcher)

    with time_machine.travel(NOV, tick=False):
        page = client.get(reverse("team-storage", kwargs={"slug": cast.team.slug}))

    text = " ".join(page.content.decode().split())
    assert "costs <strong>$163.84</strong> a month: 1024 GiB at $0.160 per provisioned GiB" in text
    assert "A stopped workspace's OS disk keeps costing too" in text


def test_the_spend_page_api_and_cli_figure_list_each_share_and_booking(client, cast, priced):
    held = NOV + timedelta(hours=8, minutes=30)
    booking(cast, 2, held, held + timedelta(hours=8, minutes=30))
    share(cast, 1024, NOV)
    client.force_login(cast.researcher)

    with time_machine.travel(NOV + timedelta(days=1), tick=False):
        body = client.get("/api/v1/teams/vision").json()
        page = client.get(reverse("team-spend", args=["vision"])).content.decode()

    assert [(c["meter"], c["quantity"], c["hours"], c["cost_usd"]) for c in body["charges"]] == [
        ("reservation", 2, "8.50", "62.44"),  # 2 x $3.673 x 8.5 h, used or not
        ("storage", 1024, "24.00", "5.39"),
    ]
    assert body["month_spend_usd"] == "67.83"
    assert "share datasets" in page and "$62.44" in page


def test_azures_cost_of_the_teams_storage_and_reservations_reconciles_with_the_estimate(
    cast, priced
):
    held = NOV + timedelta(hours=20)
    booking(cast, 2, held, held + timedelta(hours=4))
    share(cast, 1024, held, held + timedelta(hours=4))
    fetched = NOV + timedelta(days=1, hours=4)
    # What Cost Management answers for the day (the emulator's ledger bills the same meters,
    # tests/cloudsim/test_costs_api.py): grouped by workspace, both are untagged; grouped by
    # CHARGE_TAG, they are the team's. 2 x $3.673 x 4 h + 1024 GiB x 4 h x $0.16/730.
    azure = Decimal("29.384") + Decimal("0.89775342")
    untagged = AzureCost(NOV.date(), "", azure + Decimal("0.50"), "USD")  # + someone's disk
    rows = actual_costs._actual_cost_rows([untagged], fetched)
    charges = actual_costs._charge_rows([AzureCost(NOV.date(), "vision", azure, "USD")], fetched)
    ActualCost.objects.bulk_create(actual_costs._with_charges(rows, charges))
    ActualCostDay.objects.create(day=NOV.date(), fetched_at=fetched)
    actual_costs.cost_estimates_store(first=NOV.date(), last=NOV.date(), now=fetched)

    result = cost_reconciliation(
        team_ids=[cast.team.pk], first=NOV.date(), last=NOV.date(), include_unattributed=True
    )

    (row,) = result.teams[0].workspaces
    assert row.name == "Storage and capacity reservations"
    assert (row.comparison.estimate, row.comparison.actual) == (Decimal("30.28"), Decimal("30.28"))
    assert not row.comparison.flagged
    assert result.unattributed == Decimal("0.50")  # the charges are no longer unattributed
