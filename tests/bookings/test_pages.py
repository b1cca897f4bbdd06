"""The bookings pages: a member books from the team's calendar, in their own time zone, with
the cost shown before confirming; a refused booking says why and makes nothing; strangers
get 404, members without the right 403."""

from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from bookings.models import Booking, BookingState
from bookings.services import booking_create
from teams.models import AuditEntry
from tests.factories import OfferingFactory, WorkspaceFactory
from workspaces.states import Status

pytestmark = pytest.mark.django_db


@pytest.fixture
def offering(sim):
    return OfferingFactory()


def _form(offering, start, hours=8, instances=2, title="Deep learning lab"):
    end = start + timedelta(hours=hours)
    return {
        "title": title,
        "offering": offering.pk,
        "instances": instances,
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": end.strftime("%Y-%m-%dT%H:%M"),
    }


def _local_start(days=3, hour=9):
    """A local wall time `days` ahead (the form takes the user's zone's wall times)."""
    day = (timezone.now() + timedelta(days=days)).date()
    return timezone.datetime(day.year, day.month, day.day, hour, 0)


def test_a_member_books_in_their_time_zone_and_sees_the_cost_first(client, cast, offering):
    client.force_login(cast.researcher)
    client.cookies["tz"] = "Europe/Berlin"
    start = _local_start()
    quote = client.post("/teams/vision/bookings/quote/", _form(offering, start))
    assert quote.status_code == 200
    # 8 h plus the 30-minute hold before it, x 2 VMs x $3.6730/h.
    assert "$62.44" in quote.content.decode()
    created = client.post("/teams/vision/bookings/", _form(offering, start))
    assert created.status_code == 302
    booking = Booking.objects.get()
    local = booking.starts_at.astimezone(ZoneInfo("Europe/Berlin"))
    assert (local.hour, local.minute) == (9, 0)  # 09:00 in Berlin, stored in UTC
    assert booking.created_by == cast.researcher and booking.state == BookingState.SCHEDULED
    page = client.get("/teams/vision/bookings/").content.decode()
    assert "Deep learning lab" in page and "$62.44 while it is held" in page
    assert "whether you use them or not" in " ".join(page.split())  # and where it is counted


def test_a_refused_booking_says_why_and_makes_nothing(client, cast, offering):
    client.force_login(cast.researcher)
    response = client.post("/teams/vision/bookings/", _form(offering, _local_start(), instances=5))
    assert response.status_code == 400
    assert "may hold 4 A100 GPUs" in response.content.decode()
    assert not Booking.objects.exists()
    hostile = {**_form(offering, _local_start()), "instances": "1e9", "title": "a\x00b"}
    assert client.post("/teams/vision/bookings/", hostile).status_code == 400
    assert not Booking.objects.exists()


def _booking(cast, offering, user):
    start = timezone.now() + timedelta(days=2)
    return booking_create(
        actor=user,
        team=cast.team,
        title="Deadline",
        offering=offering,
        instances=1,
        starts_at=start,
        ends_at=start + timedelta(hours=4),
        now=timezone.now(),
    )


def test_who_may_see_book_and_cancel(client, cast, offering):
    booking = _booking(cast, offering, cast.team_admin)
    client.force_login(cast.outsider)
    assert client.get("/teams/vision/bookings/").status_code == 404
    assert client.post(f"/bookings/{booking.pk}/cancel/").status_code == 404
    client.force_login(cast.researcher)
    assert client.post(f"/bookings/{booking.pk}/cancel/").status_code == 403  # not theirs
    assert client.get("/bookings/").status_code == 403
    client.force_login(cast.platform_admin)
    assert "Deadline" in client.get("/bookings/").content.decode()
    client.force_login(cast.team_admin)
    assert client.post(f"/bookings/{booking.pk}/cancel/").status_code == 302
    booking.refresh_from_db()
    assert booking.state == BookingState.CANCELLED
    actions = list(AuditEntry.objects.filter(team=cast.team).values_list("action", "actor"))
    assert ("booking.create", cast.team_admin.pk) in actions
    assert ("booking.cancel", cast.team_admin.pk) in actions


def test_a_member_adds_a_workspace_to_a_booking_on_its_page(client, cast, offering):
    booking = _booking(cast, offering, cast.team_admin)
    mine = WorkspaceFactory(team=cast.team, owner=cast.researcher, status=Status.STOPPED)
    client.force_login(cast.outsider)
    add = f"/bookings/{booking.pk}/workspaces/"
    assert client.post(add, {"workspace": mine.name}).status_code == 404
    client.force_login(cast.researcher)
    assert client.post(add, {"workspace": "a\x00b"}).status_code == 302  # refused, said why
    assert client.post(add, {"workspace": mine.name}).status_code == 302
    page = client.get("/teams/vision/bookings/").content.decode()
    assert f"{mine.name}, alice" in page
    refused = client.post(add, {"name": "another"}, follow=True).content.decode()
    assert "holds 1 VM(s), and each has its workspace" in refused
    assert list(booking.seats.values_list("workspace", flat=True)) == [mine.pk]


def test_a_member_books_a_weekly_series_sees_it_and_cancels_it_at_once(client, cast, offering):
    client.force_login(cast.researcher)
    client.cookies["tz"] = "Europe/Berlin"
    start = _local_start(days=7)
    until = (start + timedelta(days=13)).date()  # two weeks: four days on two weekdays
    days = sorted({start.weekday(), (start.weekday() + 2) % 7})
    form = {**_form(offering, start), "repeat_on": days, "repeat_until": until.isoformat()}
    quote = client.post("/teams/vision/bookings/quote/", form).content.decode()
    assert "$249.76" in quote and "on each of 4 days" in quote  # 4 x $62.44
    hostile = [{"repeat_on": ["9"]}, {"repeat_until": "2027-02-30"}, {"repeat_on": []}]
    for bad in hostile:
        assert client.post("/teams/vision/bookings/", {**form, **bad}).status_code == 400
    too_long = {**form, "repeat_until": (start + timedelta(weeks=27)).date().isoformat()}
    refused = client.post("/teams/vision/bookings/", too_long)
    assert refused.status_code == 400 and "at most 26 weeks" in refused.content.decode()
    assert not Booking.objects.exists()
    assert client.post("/teams/vision/bookings/", form).status_code == 302
    made = list(Booking.objects.order_by("starts_at"))
    berlin = ZoneInfo("Europe/Berlin")
    assert {b.starts_at.astimezone(berlin).hour for b in made} == {9} and len(made) == 4
    page = client.get("/teams/vision/bookings/").content.decode()
    assert page.count('data-testid="booking-series"') == 4 and "Cancel the series" in page
    client.post(f"/bookings/{made[1].pk}/cancel/")  # one day alone
    client.post(f"/bookings/{made[2].pk}/cancel/", {"series": "1"})  # then the rest
    assert (
        list(Booking.objects.order_by("starts_at").values_list("state", flat=True))
        == [BookingState.CANCELLED] * 4
    )
