"""/api/v1/teams, /offerings, /sizing/estimate and /recommendations: the figures the team,
spend, request and savings pages show, the same rules for who sees them."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.urls import reverse

from billing.month_spend import spend_month
from teams.models import Team
from tests.billing.test_spend import A100, price, run
from tests.factories import OfferingFactory, WorkspaceFactory
from workspaces.selectors import team_quota_overview
from workspaces.states import Status

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)


def test_teams_lists_the_callers_teams_with_their_role(client, cast):
    client.force_login(cast.researcher)
    assert client.get("/api/v1/teams").json() == {
        "items": [{"slug": "vision", "name": "Vision Lab", "role": "researcher"}]
    }


def test_a_platform_admin_sees_every_team_without_a_role(client, cast):
    client.force_login(cast.platform_admin)
    items = client.get("/api/v1/teams").json()["items"]
    assert {(t["slug"], t["role"]) for t in items} == {("vision", None), ("nlp", None)}


def test_team_quota_counts_gpus_in_use_as_the_teams_page(client, cast):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING,
                     gpu_model="A100", gpu_count=2)  # fmt: skip
    WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED,
                     gpu_model="A100", gpu_count=1)  # fmt: skip
    client.force_login(cast.researcher)
    body = client.get("/api/v1/teams/vision").json()
    quota = {q["gpu_model"]: q for q in body["quota"]}
    ((_team, lines),) = team_quota_overview(teams=[cast.team])
    page = {line.gpu_model: line.used for line in lines}
    assert quota["A100"] == {"gpu_model": "A100", "gpus": 4, "in_use": str(page["A100"])}
    assert quota["A100"]["in_use"] == "2"  # the stopped one holds none; never a float
    assert quota["T4"] == {"gpu_model": "T4", "gpus": 8, "in_use": "0"}


def test_team_quota_gives_a_mig_slices_share_as_a_decimal_string_not_a_float(client, cast):
    WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.RUNNING,
                     kind="mig", gpu_model="A100", mig_profile="1g.10gb", gpu_slices=1,
                     gpu_count=0)  # fmt: skip
    client.force_login(cast.researcher)
    raw = client.get("/api/v1/teams/vision").content.decode()
    assert '"in_use": "0.1429"' in raw


@time_machine.travel(NOW, tick=False)
def test_team_month_spend_and_forecast_are_the_spend_pages(client, cast):
    price(A100, "3.00", datetime(2026, 1, 1, tzinfo=UTC))
    run(cast, start=datetime(2026, 11, 9, tzinfo=UTC), name="train-run")
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("500"))
    client.force_login(cast.researcher)
    body = client.get("/api/v1/teams/vision").json()
    expected = spend_month(team=cast.team, month=NOW.date().replace(day=1), now=NOW)
    assert body["budget_usd"] == "500.00"
    assert body["month_spend_usd"] == f"{expected.total:.2f}"
    assert Decimal(body["month_spend_usd"]) > Decimal("100")
    assert body["forecast_usd"] == f"{expected.forecast:.2f}"
    page = client.get(reverse("team-spend", args=["vision"])).content.decode()
    assert f"${expected.total:,.2f}" in page


def test_another_team_is_404(client, cast):
    client.force_login(cast.outsider)
    response = client.get("/api/v1/teams/vision")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/problem+json"


def test_offerings_with_prices_as_strings(client, cast):
    OfferingFactory()
    OfferingFactory(vm_size="Standard_NC4as_T4_v3", gpu_model="T4", price_per_hour="0.5260")
    client.force_login(cast.researcher)
    items = client.get("/api/v1/offerings?gpu_model=T4").json()["items"]
    assert [(o["vm_size"], o["price_per_hour"]) for o in items] == [
        ("Standard_NC4as_T4_v3", "0.5260")
    ]
    assert items[0]["spot_price_per_hour"] is None
    assert client.get("/api/v1/offerings?region=westeurope").json()["items"] == []


def test_offerings_refuse_control_characters(client, cast):
    client.force_login(cast.researcher)
    assert client.get("/api/v1/offerings?region=east%1bus").status_code == 400


def test_estimate_answers_as_the_estimate_page(client, cast):
    OfferingFactory()
    client.force_login(cast.researcher)
    inputs = {"parameters_b": "7", "precision": "bf16", "workload": "inference"}
    api = client.post("/api/v1/sizing/estimate", inputs, content_type="application/json")
    page = client.get(reverse("sizing-estimate"), inputs, HTTP_ACCEPT="application/json")
    assert api.status_code == 200
    assert api.json()["gpu_memory_gib"] == page.json()["gpu_memory_gib"] > 14
    assert [f["vm_size"] for f in api.json()["fits"]] == [f["vm_size"] for f in page.json()["fits"]]


@pytest.mark.parametrize(
    "body",
    [
        {"parameters_b": "7", "precision": "bf17", "workload": "inference"},
        {"parameters_b": "-7", "precision": "bf16", "workload": "inference"},
        {"parameters_b": "seven"},
        {"parameters_b": "7", "precision": "bf16", "workload": "inference", "team": "a\x00"},
        {"parameters_b": "7", "precision": "bf16", "workload": "inference", "batch": 10**12},
    ],
)
def test_estimate_refuses_bad_input_with_400(client, cast, body):
    client.force_login(cast.researcher)
    response = client.post("/api/v1/sizing/estimate", body, content_type="application/json")
    assert response.status_code == 400 and response.json()["errors"]


def test_recommendations_follow_the_savings_page_rule(client, cast):
    client.force_login(cast.researcher)
    assert client.get("/api/v1/recommendations?team=vision").status_code == 403
    assert client.get("/api/v1/recommendations").status_code == 400
    client.force_login(cast.team_admin)
    assert client.get("/api/v1/recommendations?team=vision").json() == {"items": []}
    assert client.get("/api/v1/recommendations?team=nlp").status_code == 404
