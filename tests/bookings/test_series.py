"""Weekly repeating bookings: one booking per occurrence at the same local wall time across a
daylight-saving change (stored in UTC), the quote over every occurrence to the cent, one
occurrence in conflict refusing the whole series by date with nothing made, and cancelling
one occurrence or the whole series. Every time is passed in (`now`), none is today's."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from bookings.models import Booking, BookingSeries, BookingState
from bookings.series import Repeat, booking_series_cancel, booking_series_create, series_quote
from bookings.services import BookingRefused, booking_cancel, booking_create
from teams.models import AuditEntry
from tests.factories import OfferingFactory

pytestmark = pytest.mark.django_db
BERLIN = "Europe/Berlin"
TUE, THU = 1, 3


def _series(cast, starts_at, ends_at, until, now, weekdays=(TUE,), instances=2):
    return booking_series_create(
        actor=cast.team_admin,
        team=cast.team,
        title="Course lab",
        offering=OfferingFactory(),
        instances=instances,
        starts_at=starts_at,
        ends_at=ends_at,
        repeat=Repeat(frozenset(weekdays), until, BERLIN),
        now=now,
    )


def _berlin(*args):
    """A Berlin wall time in winter (+01:00), as the form or API gives the first window."""
    return datetime(*args, tzinfo=UTC) - timedelta(hours=1)


@pytest.mark.parametrize(
    ("first_day", "until", "utc_hours"),
    [
        # Last Sunday of March 2027 is the 28th: 09:00 Berlin is 08:00 UTC, then 07:00 UTC.
        (date(2027, 3, 23), date(2027, 4, 6), [8, 7, 7]),
        # Last Sunday of October 2027 is the 31st: 09:00 Berlin is 07:00 UTC, then 08:00 UTC.
        (date(2027, 10, 19), date(2027, 11, 2), [7, 7, 8]),
    ],
)
def test_occurrences_keep_the_local_wall_time_across_dst(cast, sim, first_day, until, utc_hours):
    now = datetime(first_day.year, first_day.month, 1, tzinfo=UTC) - timedelta(days=10)
    offset = 1 if first_day.month == 3 else 2  # Berlin's offset on the first day
    start = datetime.combine(first_day, datetime.min.time(), UTC) + timedelta(hours=9 - offset)
    made = _series(cast, start, start + timedelta(hours=8), until, now)
    assert [(b.starts_at.hour, b.ends_at.hour - b.starts_at.hour) for b in made] == [
        (h, 8) for h in utc_hours
    ]
    assert [b.starts_at.date() for b in made] == [first_day + timedelta(weeks=w) for w in range(3)]
    series = BookingSeries.objects.get()
    assert {b.series_id for b in made} == {series.pk} and series.day_names == ["Tue"]
    assert len({b.azure_name for b in made}) == 3  # each holds its own reservation


def test_the_quote_covers_every_occurrence_to_the_cent(cast, sim):
    now = datetime(2027, 2, 20, tzinfo=UTC)
    start = _berlin(2027, 3, 2, 9)  # a Tuesday
    quote = series_quote(
        team=cast.team,
        offering=OfferingFactory(),
        instances=2,
        starts_at=start,
        ends_at=start + timedelta(hours=8),
        repeat=Repeat(frozenset({TUE, THU}), date(2027, 3, 11), BERLIN),
        now=now,
    )
    # Tue 2, Thu 4, Tue 9, Thu 11 March: each 8.5 h held x 2 VMs x $3.6730 = $62.44.
    assert len(quote.occurrences) == 4 and quote.over == ()
    assert (quote.cost, quote.held_hours, quote.gpus) == (Decimal("249.76"), Decimal("34"), 2)
    cast.team.monthly_budget = Decimal("200.00")
    cast.team.save(update_fields=["monthly_budget"])
    over = series_quote(
        team=cast.team,
        offering=OfferingFactory(),
        instances=2,
        starts_at=start,
        ends_at=start + timedelta(hours=8),
        repeat=Repeat(frozenset({TUE, THU}), date(2027, 3, 11), BERLIN),
        now=now,
    ).over
    assert over == ("In March 2027: It costs $249.76; Vision Lab has $200.00 of its monthly "
                    "budget left.",)  # fmt: skip


def test_one_occurrence_in_conflict_refuses_the_whole_series_saying_when(cast, sim):
    now = datetime(2027, 2, 20, tzinfo=UTC)
    sim.set_quota("eastus", "standardNCADSA100v4Family", 1000)
    taken = _berlin(2027, 3, 9, 10)
    booking_create(
        actor=cast.team_admin,
        team=cast.team,
        title="Deadline",
        offering=OfferingFactory(),
        instances=3,
        starts_at=taken,
        ends_at=taken + timedelta(hours=2),
        now=now,
    )
    start = _berlin(2027, 3, 2, 9)
    with pytest.raises(BookingRefused) as refused:
        _series(cast, start, start + timedelta(hours=8), date(2027, 3, 16), now)
    assert refused.value.reasons == (
        "Tue 09 Mar 2027 09:00: Vision Lab may hold 4 A100 GPUs; its other bookings then hold "
        "3, and this one asks for 2.",
    )
    assert Booking.objects.count() == 1 and not BookingSeries.objects.exists()  # nothing made


def test_the_repeat_itself_is_checked(cast, sim):
    now = datetime(2027, 2, 20, tzinfo=UTC)
    start = _berlin(2027, 3, 2, 9)
    cases = [
        (start + timedelta(hours=8), date(2027, 9, 1), (), "at most 26 weeks"),
        (start + timedelta(hours=8), date(2027, 3, 1), (TUE,), "on or after its first day"),
        (start + timedelta(hours=25), date(2027, 3, 9), (TUE,), "at most 24 hours"),
    ]
    for ends_at, until, weekdays, why in cases:
        with pytest.raises(BookingRefused, match=why):
            _series(cast, start, ends_at, until, now, weekdays=weekdays or (TUE,))
    with pytest.raises(BookingRefused, match="weekdays it repeats on"):
        _series(cast, start, start + timedelta(hours=8), date(2027, 3, 9), now, weekdays=())
    assert not Booking.objects.exists()


def test_cancel_one_occurrence_or_the_rest_of_the_series(cast, sim):
    now = datetime(2027, 2, 20, tzinfo=UTC)
    start = _berlin(2027, 3, 2, 9)
    first, second, third = _series(cast, start, start + timedelta(hours=8), date(2027, 3, 16), now)
    assert booking_cancel(actor=cast.team_admin, booking=second, now=now)
    Booking.objects.filter(pk=first.pk).update(state=BookingState.ENDED)  # already over
    assert booking_series_cancel(actor=cast.researcher, booking=third, now=now) == 1
    states = dict(Booking.objects.values_list("pk", "state"))
    assert [states[b.pk] for b in (first, second, third)] == ["ended", "cancelled", "cancelled"]
    cancels = AuditEntry.objects.filter(action="booking.cancel").count()
    assert cancels == 2 and AuditEntry.objects.filter(action="booking.series_create").exists()


def test_a_series_through_the_api_quoted_booked_refused_and_cancelled(client, cast, sim):
    OfferingFactory()
    sim.set_quota("eastus", "standardNCADSA100v4Family", 1000)  # Azure has room for all
    client.force_login(cast.researcher)
    start = (timezone.now() + timedelta(days=7)).replace(microsecond=0)
    until = (start + timedelta(days=13)).date().isoformat()
    # The first day's weekday by name, and two days later by number.
    days = [start.strftime("%a").lower(), (start.weekday() + 2) % 7]
    body = {
        "title": "Course",
        "vm_size": "Standard_NC24ads_A100_v4",
        "region": "eastus",
        "instances": 2,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(hours=8)).isoformat(),
        "repeat": {"weekdays": days, "until": until, "time_zone": "UTC"},
    }
    post = lambda b: client.post(  # noqa: E731
        "/api/v1/teams/vision/bookings", b, content_type="application/json"
    )
    quote = post({**body, "dry_run": True}).json()
    assert quote["cost_usd"] == "249.76" and quote["refused"] == []
    assert [o["cost_usd"] for o in quote["occurrences"]] == ["62.44"] * 4
    hostile = [
        {"weekdays": ["xyz"], "until": until},
        {"weekdays": [], "until": until},
        {"weekdays": [7], "until": until},
        {"weekdays": [True], "until": until},
        {"weekdays": ["tue"], "until": "2027-02-30"},
        {"weekdays": ["tue"], "until": until, "time_zone": "Mars/Base"},
        {"weekdays": ["tue"], "until": (start + timedelta(weeks=30)).date().isoformat()},
        "weekly",
    ]
    for bad in hostile:
        refused = post({**body, "repeat": bad})
        assert refused.status_code == 400, (bad, refused.content)
        assert refused["Content-Type"] == "application/problem+json"
    ancient = {"starts_at": "0001-01-01T00:00:00+05:00", "ends_at": "0001-01-01T08:00:00+05:00"}
    for repeat in (body["repeat"], None):  # at datetime's lower end: refused, not a 500
        assert post({**body, **ancient, "repeat": repeat}).status_code == 400
    assert not Booking.objects.exists()
    made = post(body)
    assert made.status_code == 201, made.content
    series = made.json()
    assert series["cost_usd"] == "249.76" and len(series["items"]) == 4
    assert {b["series_id"] for b in series["items"]} == {series["series_id"]}
    clash = post({**body, "instances": 3}).json()["errors"]  # 2 + 3 of the team's 4 A100s
    assert len(clash) == 4 and "may hold 4 A100 GPUs" in clash[0]["msg"]
    first = series["items"][0]["id"]
    cancelled = client.post(f"/api/v1/bookings/{first}/cancel?series=true")
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert set(Booking.objects.values_list("state", flat=True)) == {BookingState.CANCELLED}
