"""Pages as the fixed cast sees them: visibility, form errors, htmx polling, health."""

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import pytest
import time_machine
from django.urls import reverse

from live.stamps import AfterCommit
from teams.models import Team
from tests.factories import SSH_KEY, MembershipFactory, OfferingFactory, WorkspaceFactory
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db


@pytest.fixture
def workspace(cast):
    return WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.RUNNING, private_ip="10.0.0.4"
    )


def _client(client, user):
    client.force_login(user)
    return client


def _form(chosen, **overrides):
    data = {
        "team": "",
        "name": "llm-finetune",
        "region": chosen.region,
        "offering": chosen.pk,
        "ssh_public_key": SSH_KEY,
        "request_key": str(uuid.uuid4()),
    }
    return {**data, **overrides}


@pytest.mark.parametrize(
    "who,expected",
    [("researcher", 200), ("team_admin", 200), ("platform_admin", 200), ("outsider", 404)],
)
def test_detail_is_seen_by_the_team_and_platform_admin_only(client, cast, workspace, who, expected):
    response = _client(client, getattr(cast, who)).get(
        reverse("workspaces:detail", kwargs={"pk": workspace.pk})
    )
    assert response.status_code == expected


def test_anonymous_users_are_sent_to_log_in(client, workspace):
    response = client.get(reverse("workspaces:detail", kwargs={"pk": workspace.pk}))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_list_shows_only_the_users_teams(client, cast, workspace):
    WorkspaceFactory(team=cast.other_team, owner=cast.outsider, name="secret-nlp")
    page = _client(client, cast.researcher).get(reverse("workspaces:list")).content.decode()
    assert workspace.name in page and "secret-nlp" not in page


def test_running_detail_shows_how_to_connect(client, cast, workspace):
    page = _client(client, cast.researcher).get(
        reverse("workspaces:detail", kwargs={"pk": workspace.pk})
    )
    assert "ssh researcher@10.0.0.4" in page.content.decode()


@pytest.mark.parametrize("action", ["stop", "start", "delete", "retry"])
def test_an_outsider_acting_on_the_workspace_gets_404(client, cast, workspace, action):
    url = reverse("workspaces:action", kwargs={"pk": workspace.pk, "action": action})
    assert _client(client, cast.outsider).post(url).status_code == 404
    assert Workspace.objects.get(pk=workspace.pk).status == Status.RUNNING


def test_a_teammate_who_does_not_own_it_gets_403(client, cast, workspace):
    url = reverse("workspaces:action", kwargs={"pk": workspace.pk, "action": "stop"})
    assert _client(client, cast.teammate).post(url).status_code == 403


def test_unknown_action_is_404(client, cast, workspace):
    url = f"/workspaces/{workspace.pk}/explode/"
    assert _client(client, cast.researcher).post(url).status_code == 404


def test_an_illegal_action_is_refused_with_a_message(client, cast, workspace):
    url = reverse("workspaces:action", kwargs={"pk": workspace.pk, "action": "start"})
    response = _client(client, cast.researcher).post(url, follow=True)
    assert response.status_code == 200
    assert "running cannot become starting" in response.content.decode()


def test_polling_stops_with_286_once_steady(client, cast, workspace):
    url = reverse("workspaces:detail", kwargs={"pk": workspace.pk})
    c = _client(client, cast.researcher)
    steady = c.get(url, HTTP_HX_REQUEST="true")
    assert steady.status_code == 286
    assert "<html" not in steady.content.decode()
    Workspace.objects.filter(pk=workspace.pk).update(status=Status.STOPPING)
    busy = c.get(url, HTTP_HX_REQUEST="true")
    assert busy.status_code == 200 and 'hx-trigger="every 2s"' in busy.content.decode()


def test_request_form_shows_sizes_with_gpus_memory_and_price(client, cast):
    OfferingFactory()
    page = _client(client, cast.researcher).get(reverse("workspaces:request")).content.decode()
    assert "Standard_NC24ads_A100_v4" in page
    assert "1 × A100" in page and "80 GB each" in page and "$3.67" in page


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("name", "", "This field is required"),
        ("name", "Bad Name!", "lower-case letters"),
        ("ssh_public_key", "not a key", "OpenSSH public key"),
        ("ssh_public_key", "ssh-ed25519 !!!notbase64", "damaged"),
        ("offering", "999999", "not offered"),
        ("region", "mars-central", "Select a valid choice"),
    ],
)
def test_bad_input_gets_a_form_error_not_a_500(client, cast, field, value, message):
    offering = OfferingFactory()
    data = _form(offering, team=cast.team.pk, **{field: value})
    response = _client(client, cast.researcher).post(reverse("workspaces:request"), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Workspace.objects.exists()


def test_a_size_withdrawn_by_the_platform_admin_is_refused(client, cast):
    offering = OfferingFactory(offered=False)
    OfferingFactory(vm_size="Standard_NC4as_T4_v3", gpu_model="T4")
    data = _form(offering, team=cast.team.pk)
    response = _client(client, cast.researcher).post(reverse("workspaces:request"), data)
    assert "not offered" in response.content.decode()
    assert not Workspace.objects.exists()


def test_a_size_from_another_region_is_refused(client, cast):
    offering = OfferingFactory(region="westus2")
    OfferingFactory(region="eastus")
    data = _form(offering, team=cast.team.pk, region="eastus")
    response = _client(client, cast.researcher).post(reverse("workspaces:request"), data)
    assert "not offered in that region" in response.content.decode()


def test_requesting_for_another_team_is_refused(client, cast):
    offering = OfferingFactory()
    data = _form(offering, team=cast.other_team.pk)
    response = _client(client, cast.researcher).post(reverse("workspaces:request"), data)
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()


def test_double_click_on_request_creates_one_workspace(
    client, cast, django_capture_on_commit_callbacks
):
    offering = OfferingFactory()
    data = _form(offering, team=cast.team.pk)
    c = _client(client, cast.researcher)
    with django_capture_on_commit_callbacks() as callbacks:
        first = c.post(reverse("workspaces:request"), data)
        second = c.post(reverse("workspaces:request"), data)
    assert first.status_code == second.status_code == 302
    assert first["Location"] == second["Location"]
    tasks = [c for c in callbacks if not isinstance(c, AfterCommit)]  # live pages' bumps aside
    assert Workspace.objects.count() == 1 and len(tasks) == 1


def test_healthz_reports_database_and_broker(client):
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200 and body["status"] == "ok"
    assert body["database"]["ok"] is True and body["broker"]["ok"] is True


def test_request_form_starts_in_the_default_region_and_switches_by_htmx(client, cast, settings):
    settings.AZURE_LOCATION = "eastus"
    OfferingFactory(region="centralus", vm_size="Standard_NC4as_T4_v3", gpu_model="T4")
    OfferingFactory(region="eastus")
    c = _client(client, cast.researcher)
    page = c.get(reverse("workspaces:request")).content.decode()
    assert "VM size in eastus" in page and "Standard_NC4as_T4_v3" not in page
    partial = c.get(reverse("workspaces:request"), {"region": "centralus"}, HTTP_HX_REQUEST="true")
    body = partial.content.decode()
    assert "<html" not in body and "Standard_NC4as_T4_v3" in body


def test_platform_admin_withdraws_a_size_in_the_admin(client, cast):
    offering = OfferingFactory()
    url = reverse("admin:workspaces_sizeoffering_changelist")
    admin = _client(client, cast.platform_admin)
    assert admin.get(url).status_code == 200
    admin.post(url, {"action": "withdraw", "_selected_action": [offering.pk]})
    offering.refresh_from_db()
    assert offering.offered is False


@pytest.mark.parametrize("who", ["researcher", "team_admin", "outsider"])
def test_only_platform_admins_reach_the_admin(client, cast, who):
    url = reverse("admin:workspaces_sizeoffering_changelist")
    response = _client(client, getattr(cast, who)).get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_healthz_is_503_when_the_broker_is_down(client, settings):
    from portal.celery import app

    app.conf.broker_url, original = "redis://127.0.0.1:1/0", app.conf.broker_url
    try:
        response = client.get("/healthz")
    finally:
        app.conf.broker_url = original
    assert response.status_code == 503
    assert response.json()["broker"]["ok"] is False and response.json()["database"]["ok"] is True


@time_machine.travel(datetime(2026, 11, 10, 12, 0, tzinfo=UTC), tick=False)
def test_the_size_table_shows_what_each_size_does_to_the_teams_budget(client, cast):
    OfferingFactory()  # A100 at $3.673/hour
    OfferingFactory(vm_size="Standard_NC4as_T4_v3", gpu_model="T4", price_per_hour=Decimal("0.526"))
    Team.objects.filter(pk=cast.team.pk).update(monthly_budget=Decimal("100"))
    Team.objects.filter(pk=cast.other_team.pk).update(monthly_budget=Decimal("1000"))
    c = _client(client, cast.researcher)
    MembershipFactory(team=cast.other_team, user=cast.researcher)

    vision = c.get(reverse("workspaces:request"), {"team": cast.team.pk}, HTTP_HX_REQUEST="true")
    nlp = c.get(reverse("workspaces:request"), {"team": cast.other_team.pk}, HTTP_HX_REQUEST="true")

    # $100 with nothing burning: A100 for 27.2 h (to 11 Nov 15:13), T4 for 190 h (to 18 Nov).
    rows = vision.content.decode()
    assert "Team budget with it" in rows
    assert rows.index("runs out 11 Nov") < rows.index("runs out 18 Nov")  # A100 row, then T4
    # $1,000: the A100 for 272 h, to 21 Nov; the T4 lasts the month (1,901 h).
    assert "runs out 21 Nov" in nlp.content.decode() and "lasts the month" in nlp.content.decode()


def test_healthz_says_which_dependency_is_down_but_not_its_address(client, caplog):
    """Anyone may read /healthz: the driver's error (hosts, ports) goes to the log only."""
    from portal.celery import app

    old = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:6391/0"  # nothing listens there
    try:
        with caplog.at_level("WARNING", logger="portal.health"):
            response = client.get("/healthz")
    finally:
        app.conf.broker_url = old
    body = response.json()
    assert response.status_code == 503 and body["status"] == "down"
    assert body["broker"] == {"ok": False, "transport": "redis", "error": "unreachable"}
    assert body["database"]["ok"] is True
    assert "127.0.0.1" not in response.content.decode() and "6391" not in response.content.decode()
    assert "the broker is down" in caplog.text
