"""The team spend page, its chart data and its CSV export: what a member sees, and what a
stranger does not."""

import csv
import io
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.template.defaultfilters import floatformat
from django.urls import reverse

from billing.templatetags.money import usd
from teams.models import Team
from tests.billing.test_spend import A100, price, run

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def spending(cast):
    """Two workspaces of the cast's team: one ran 10 h on 2 Nov, one runs since 9 Nov 00:00."""
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    price("P10 LRS", "19.71", datetime(2026, 1, 1, tzinfo=UTC), kind="disk", unit="1/Month")
    done = run(
        cast,
        start=datetime(2026, 11, 2, 8, tzinfo=UTC),
        stop=datetime(2026, 11, 2, 18, tzinfo=UTC),
        name="=HYPERLINK(1)",
    )
    running = run(cast, start=datetime(2026, 11, 9, tzinfo=UTC), name="train-run")
    return done, running


def csv_rows(response):
    text = b"".join(response.streaming_content).decode()
    return list(csv.DictReader(io.StringIO(text)))


@time_machine.travel(NOW, tick=False)
def test_a_member_sees_the_month_to_date_and_the_chart_data_adds_up(client, cast, spending):
    client.force_login(cast.researcher)

    page = client.get(reverse("team-spend", args=[cast.team.slug]))
    data = client.get(reverse("team-spend-data", args=[cast.team.slug])).json()

    # Compute: 10 h + 36 h at $3.00 = $138.00. Disks at $0.027/h: the first since it first
    # ran, 2 Nov 08:00 (kept after the stop), the second since 9 Nov; per-day cents added up.
    total = Decimal(data["total"])
    assert page.status_code == 200 and f"${total:,.2f}" in page.content.decode()
    assert sum(Decimal(v) for values in data["series"].values() for v in values) == total
    assert data["series"]["vm"][1] == "30.43"  # 2 Nov: 10 h x $3 + 16 h x $0.027 = $30.432
    # 1 Nov to today, 10 Nov: no day that has not come yet (issue 29 #6)
    assert data["days"][0] == "2026-11-01" and data["days"][-1] == "2026-11-10"
    table = page.content.decode().split('id="per-day"')[1].split("</table>")[0]
    assert "Tue 10 Nov" in table and "Wed 11 Nov" not in table and "Mon 30 Nov" not in table
    assert Decimal("138.00") < total < Decimal("145.00")


@time_machine.travel(NOW, tick=False)
def test_the_csv_has_one_row_per_workspace_and_day_and_matches_the_page(client, cast, spending):
    client.force_login(cast.team_admin)
    data = client.get(reverse("team-spend-data", args=[cast.team.slug])).json()

    response = client.get(
        reverse("team-spend-csv", args=[cast.team.slug]),
        {"start": "2026-11-01", "end": "2026-11-30"},
    )

    rows = csv_rows(response)
    assert response["Content-Type"].startswith("text/csv")
    assert sum(Decimal(r["cost_usd"]) for r in rows) == Decimal(data["total"])
    first = rows[0]
    assert first["day"] == "2026-11-02" and first["workspace"] == "'=HYPERLINK(1)"
    assert (first["compute_hours"], first["compute_usd"]) == ("10.00", "30.00")
    assert len({(r["day"], r["workspace_id"]) for r in rows}) == len(rows)
    assert [r["day"] for r in rows] == sorted(r["day"] for r in rows)  # streamed week by week


@pytest.mark.parametrize(
    "period, message",
    [
        ({"start": "2026-11-30", "end": "2026-11-01"}, "The period ends before it starts."),
        ({"start": "2020-01-01", "end": "2026-11-30"}, "Export at most 366 days at a time"),
        ({"start": "tomorrow", "end": "2026-11-30"}, "Enter a valid date."),
    ],
)
def test_a_bad_export_period_is_a_form_error_on_the_spend_page(client, cast, period, message):
    client.force_login(cast.researcher)

    response = client.get(reverse("team-spend-csv", args=[cast.team.slug]), period)

    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert message in page and "Spend" in page  # the page, with the form's error
    assert f'value="{period["start"]}"' in page  # what was typed stays in the form


def test_a_bad_month_gets_a_form_error_not_a_500(client, cast):
    client.force_login(cast.researcher)

    page = client.get(reverse("team-spend", args=[cast.team.slug]), {"month": "2026-13"})
    data = client.get(reverse("team-spend-data", args=[cast.team.slug]), {"month": "x"})

    assert page.status_code == 400 and "Give the month as YYYY-MM" in page.content.decode()
    assert data.status_code == 400 and "YYYY-MM" in data.json()["error"]


@time_machine.travel(NOW, tick=False)
def test_the_forecast_says_when_the_budget_runs_out(client, cast, spending):
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("500"))
    client.force_login(cast.researcher)

    page = client.get(reverse("team-spend", args=[cast.team.slug])).content.decode()

    # About $141 spent by 10 Nov 12:00; the rate is the mean of the burn ($3.054/h) and the
    # month's average (~$0.60/h), ~$1.83/h: the $359 left lasts ~196 h, to about 18 Nov.
    assert "the $500.00 budget runs out on 18 Nov" in page
    assert "Forecast: spend so far plus" in page


@time_machine.travel(NOW, tick=False)
def test_a_past_month_shows_its_total_and_no_forecast(client, cast, spending):
    client.force_login(cast.researcher)

    page = client.get(reverse("team-spend", args=[cast.team.slug]), {"month": "2026-10"})

    body = page.content.decode()
    assert "October 2026" in body and "$0.00" in body and "Forecast to month end" not in body


@time_machine.travel(NOW, tick=False)
def test_a_workspace_page_shows_its_cost_and_a_stopped_vm_its_disk(client, cast, spending):
    done, running = spending
    client.force_login(cast.researcher)

    stopped = client.get(reverse("workspaces:detail", args=[done.pk])).content.decode()
    live = client.get(reverse("workspaces:detail", args=[running.pk])).content.decode()

    # Stopped: 10 h x $3 + 196 h of disk (2 Nov 08:00 to 10 Nov 12:00) x $0.027 = $35.292.
    assert "$35.29 this month, $35.29 in total" in stopped
    assert "$0.0270 per hour for its OS disk, while stopped" in stopped
    # Running since 9 Nov: 36 h x ($3 + $0.027) = $108.972.
    assert "$108.97 this month" in live and "$3.0270 per hour, of which $0.0270" in live


@time_machine.travel(NOW, tick=False)
def test_the_platform_admin_sees_every_team_and_the_top_workspaces(client, cast, spending):
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("500"))
    price("Standard_NC4as_T4_v3", "0.526", datetime(2026, 1, 1, tzinfo=UTC))
    other = run(
        cast,
        team=cast.other_team,
        start=datetime(2026, 11, 10, 2, tzinfo=UTC),
        name="nlp-t4",
        vm_size="Standard_NC4as_T4_v3",
    )
    client.force_login(cast.platform_admin)
    team_total = client.get(reverse("team-spend-data", args=[cast.team.slug])).json()["total"]

    body = client.get(reverse("platform-spend")).content.decode()

    assert f"${Decimal(team_total):,.2f}" in body and "runs out 18 Nov" in body
    # NLP: 10 h x ($0.526 + $0.027 disk) = $5.53, no budget.
    assert "$5.53" in body and "no limit" in body
    # Ranked by cost: train-run ($108.97) above nlp-t4 ($5.53), both teams in one table.
    assert body.index("train-run") < body.index(other.name) < body.index("Chargeback export")


@time_machine.travel(NOW, tick=False)
def test_the_chargeback_csv_covers_all_teams_one_row_per_team_workspace_and_day(
    client, cast, spending
):
    run(cast, team=cast.other_team, start=datetime(2026, 11, 10, 2, tzinfo=UTC), name="nlp-a100")
    client.force_login(cast.platform_admin)

    rows = csv_rows(
        client.get(reverse("platform-spend-csv"), {"start": "2026-11-01", "end": "2026-11-10"})
    )

    assert {r["team"] for r in rows} == {"Vision Lab", "NLP"}
    assert len({(r["day"], r["team"], r["workspace_id"]) for r in rows}) == len(rows)
    nlp = [r for r in rows if r["team"] == "NLP"]
    assert [(r["day"], r["compute_usd"]) for r in nlp] == [("2026-11-10", "30.00")]  # 10 h x $3


def test_a_bad_chargeback_period_is_a_form_error_on_the_spend_page(client, cast):
    client.force_login(cast.platform_admin)

    response = client.get(
        reverse("platform-spend-csv"), {"start": "2026-11-30", "end": "2026-11-01"}
    )

    assert response.status_code == 400 and response["Content-Type"].startswith("text/html")
    assert "ends before it starts" in response.content.decode()


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (Decimal("1234567.891"), "$1,234,567.89"),
        (Decimal("0.005"), "$0.01"),  # half up, as floatformat
        (Decimal("2.675"), "$2.68"),
        (Decimal("-1234.5"), "-$1,234.50"),
        (Decimal("-0.001"), "$0.00"),  # never '-0.00'
        (5, "$5.00"),
        (None, ""),
        ("", ""),
        ("n/a", ""),
    ],
)
def test_amounts_are_shown_in_usd_to_the_cent_as_floatformat_would(amount, shown):
    assert usd(amount) == shown
    assert usd(amount).replace("$", "") == floatformat(amount, "2g")
