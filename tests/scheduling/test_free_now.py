"""The "free now" board: per GPU model and region, what the team can start now (its quota
left and Azure's regional quota left), how many wait in the queue; the request form shows the
same, and the API returns it."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from bookings.services import booking_create
from teams.models import GpuQuota
from tests.factories import OfferingFactory, WorkspaceFactory
from workspaces.states import Status

pytestmark = pytest.mark.django_db


def _scarce(cast, sim):
    """Azure's quota in eastus has room for two more A100 VMs; the team has 3 A100s left of
    4 (one runs) and one request of another team waits in the queue."""
    OfferingFactory()
    sim.set_quota("eastus", "standardNCADSA100v4Family", 48)
    WorkspaceFactory(team=cast.team, status=Status.RUNNING, gpu_model="A100", gpu_count=1)
    WorkspaceFactory(team=cast.other_team, status=Status.QUEUED, gpu_model="A100", gpu_count=1)


def test_the_board_shows_what_the_team_can_start_and_the_queue(client, cast, sim):
    _scarce(cast, sim)
    client.force_login(cast.researcher)
    rows = client.get("/api/v1/free-now?team=vision").json()
    (a100,) = [r for r in rows if r["gpu_model"] == "A100" and r["region"] == "eastus"]
    assert a100["team_gpus_left"] == "3" and a100["team_quota"] == 4
    (size,) = a100["sizes"]
    assert size["azure_vms_left"] == 2 and size["can_start"] == 2
    assert a100["queued"] == 1
    page = client.get(reverse("scheduling:free-now"))
    assert b"you can start 2" in page.content


def test_the_team_quota_bounds_what_can_start(client, cast, sim):
    _scarce(cast, sim)
    GpuQuota.objects.filter(team=cast.team, gpu_model="A100").update(gpus=1)
    client.force_login(cast.researcher)
    (a100,) = [
        r for r in client.get("/api/v1/free-now?team=vision").json() if r["gpu_model"] == "A100"
    ]
    assert a100["team_gpus_left"] == "0" and a100["sizes"][0]["can_start"] == 0


def test_the_request_form_loads_the_board_for_its_team(client, cast, sim):
    _scarce(cast, sim)
    client.force_login(cast.researcher)
    form = client.get(reverse("workspaces:request"))
    assert reverse("scheduling:free-now").encode() in form.content
    partial = client.get(
        reverse("scheduling:free-now"), {"team": cast.team.pk}, HTTP_HX_REQUEST="true"
    )
    assert b"Free now for Vision Lab" in partial.content and b"<html" not in partial.content


def test_another_teams_board_is_404(client, cast, sim):
    client.force_login(cast.researcher)
    assert client.get(reverse("scheduling:free-now"), {"team": "nlp"}).status_code == 404
    assert client.get("/api/v1/free-now?team=nlp").status_code == 404
    # A NUL or a name no slug can have is no team either, on PostgreSQL too (not a 500).
    for bad in ("a\x00b", "x" * 51, "a b"):
        assert client.get(reverse("scheduling:free-now"), {"team": bad}).status_code == 404
        assert client.get("/api/v1/free-now", {"team": bad}).status_code == 404


def test_the_board_lists_the_next_bookings_of_the_model_and_region(client, cast, sim):
    _scarce(cast, sim)
    start = timezone.now() + timedelta(days=1)
    booking_create(
        actor=cast.outsider, team=cast.other_team, title="Course", offering=OfferingFactory(),
        instances=1, starts_at=start, ends_at=start + timedelta(hours=8), now=timezone.now(),
    )  # fmt: skip
    client.force_login(cast.researcher)
    rows = client.get("/api/v1/free-now?team=vision").json()
    (a100,) = [r for r in rows if r["gpu_model"] == "A100"]
    assert len(a100["next_bookings"]) == 1 and a100["next_bookings"][0].startswith("1 x ")
