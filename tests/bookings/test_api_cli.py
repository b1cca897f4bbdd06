"""Bookings through the API (the quote with dry_run, booking, refusals as 400 problems,
cancelling; strangers 404) and the CLI (`gpuportal book` shows the cost and asks first)."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from gpuportal.app import app
from typer.testing import CliRunner

from bookings.models import Booking, BookingState
from teams.tokens import api_token_create
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)
A100 = "Standard_NC24ads_A100_v4"


def _body(hours_ahead=48, instances=2, **extra):
    start = (timezone.now() + timedelta(hours=hours_ahead)).replace(microsecond=0)
    return {
        "title": "Course",
        "vm_size": A100,
        "region": "eastus",
        "instances": instances,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(hours=8)).isoformat(),
        **extra,
    }


def _post(client, body, team="vision"):
    return client.post(f"/api/v1/teams/{team}/bookings", body, content_type="application/json")


def test_quote_book_refuse_and_cancel_through_the_api(client, cast, sim):
    OfferingFactory()
    client.force_login(cast.researcher)
    quote = _post(client, _body(dry_run=True))
    assert quote.status_code == 200
    assert quote.json()["cost_usd"] == "62.44" and quote.json()["refused"] == []
    assert not Booking.objects.exists()  # a quote books nothing
    made = _post(client, _body())
    assert made.status_code == 201 and made.json()["cost_usd"] == "62.44"
    refused = _post(client, _body(instances=3))
    assert refused.status_code == 400
    assert "may hold 4 A100 GPUs" in refused.json()["errors"][0]["msg"]
    naive = _post(client, {**_body(), "starts_at": "2027-01-01T09:00:00"})
    assert naive.status_code == 400
    listed = client.get("/api/v1/teams/vision/bookings").json()["items"]
    assert [b["instances"] for b in listed] == [2]
    seats = f"/api/v1/bookings/{made.json()['id']}/workspaces"
    mine = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    added = client.post(seats, {"workspace": mine.name}, content_type="application/json")
    assert added.status_code == 201, added.json()
    made_later = {"name": "lab-2", "ssh_public_key": SSH_KEY}
    added = client.post(seats, made_later, content_type="application/json")
    assert [(s["name"], s["owner"]) for s in added.json()["workspaces"]] == [
        (mine.name, "alice"),
        ("lab-2", "alice"),
    ]
    full = client.post(seats, {"name": "lab-3"}, content_type="application/json")
    assert full.status_code == 400 and "holds 2 VM" in full.json()["errors"][0]["msg"]
    cancelled = client.post(f"/api/v1/bookings/{made.json()['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == BookingState.CANCELLED
    client.force_login(cast.outsider)
    assert client.get("/api/v1/teams/vision/bookings").status_code == 404
    assert client.post(f"/api/v1/bookings/{uuid.uuid4()}/cancel").status_code == 404
    assert client.post(seats, made_later, content_type="application/json").status_code == 404


def test_the_cli_shows_the_cost_and_books_once_confirmed(live_server, cast, sim):
    OfferingFactory()
    token = api_token_create(
        user=cast.researcher, name="cli", scope="write", expires_in_days=1, now=timezone.now()
    )[1]
    run = CliRunner().invoke
    login = ["login", "--url", live_server.url, "--token-stdin"]
    assert run(app, login, input=token).exit_code == 0
    body = _body()
    args = ["book", "--team", "vision", "--size", A100, "--region", "eastus", "--vms", "2"]
    args += ["--from", body["starts_at"], "--until", body["ends_at"], "--title", "Lab"]
    declined = run(app, args, input="n\n")
    assert "62.44 USD for 2 GPUs" in declined.output and declined.exit_code == 1
    assert not Booking.objects.exists()
    mine = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    booked = run(app, [*args, "--workspace", mine.name], input="y\n")
    assert booked.exit_code == 0, booked.output
    assert f"Its workspaces: {mine.name}." in booked.output
    booking = Booking.objects.get()
    added = run(app, ["book-workspace", str(booking.pk), "--new", "lab-2", "--ssh-key", SSH_KEY])
    assert added.exit_code == 0 and f"{mine.name}, lab-2" in added.output, added.output
    refused = run(app, ["book-workspace", str(booking.pk), "--new", "lab-3"])
    assert refused.exit_code != 0 and "holds 2 VM" in refused.output
    listed = run(app, ["bookings", "--team", "vision"])
    assert "Lab" in listed.output and "scheduled" in listed.output
    too_many = run(app, [*args[:-4], "--vms", "9", *args[-4:], "--yes"])
    assert too_many.exit_code == 1 and "Refused:" in too_many.output
    # Every week on the first day's weekday, two weeks: two bookings of one series.
    first = timezone.now().replace(microsecond=0) + timedelta(days=20)
    weekly = [
        *args[:9],
        "--from",
        first.isoformat(),
        "--to",
        (first + timedelta(hours=8)).isoformat(),
    ]
    weekly += ["--every", first.strftime("%a").lower(), "--tz", "UTC", "--yes"]
    last_day = (first + timedelta(days=7)).date().isoformat()
    assert run(app, [*weekly[:-5], "--every", "someday", "--until", last_day]).exit_code == 2
    series = run(app, [*weekly, "--until", last_day])
    assert series.exit_code == 0 and "on each of 2 days" in series.output, series.output
    assert "Booked series" in series.output and "124.88 USD" in series.output
    one = Booking.objects.filter(series__isnull=False).first()
    assert run(app, ["unbook", str(one.pk), "--series"]).exit_code == 0
    cancelled = Booking.objects.filter(series=one.series, state=BookingState.CANCELLED)
    assert cancelled.count() == 2
