"""Weekly repeating bookings (docs/bookings.md, "Repeating bookings"): "Tuesdays and
Thursdays 09:00-17:00 Europe/Berlin until 1 March" is one Booking per occurrence, linked by
a BookingSeries, so each holds and releases its own capacity reservation through
bookings.lifecycle and can be cancelled alone or with the whole series.

Occurrences keep the first window's local wall times in the series' time zone across a
daylight-saving change (zoneinfo; stored in UTC), so 09:00 Berlin is 08:00 UTC in winter and
07:00 UTC in summer. A wall time a spring-forward skips is taken as the same wall time after
the change (fold=0), as scheduling.calendar does. The quote covers every occurrence; one
refused occurrence refuses the whole series, naming its date, and nothing is made.

Money is USD (Decimal); times are aware UTC.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib.auth.models import User
from django.db import transaction

from bookings.models import LIVE, Booking, BookingSeries
from bookings.services import (
    MAX_AHEAD,
    BookingRefused,
    Quote,
    booking_cancel,
    booking_quote,
    booking_row,
    budget_problem,
)
from teams.audit import audit_record
from teams.guards import team_lock
from teams.models import Team
from workspaces.models import SizeOffering

MAX_WEEKS = 26  # how long a series may run, from its first day
MAX_SERIES_WINDOW = timedelta(hours=24)  # one occurrence's window, in wall-clock time
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


@dataclass(frozen=True)
class Repeat:
    """Every week on ``weekdays`` (Monday 0 .. Sunday 6) up to ``until`` (a local date, the
    last day an occurrence may start), at wall times in ``time_zone`` (an IANA name)."""

    weekdays: frozenset[int]
    until: date
    time_zone: str


@dataclass(frozen=True)
class Occurrence:
    """One window of a series (UTC) and its quote (without the budget: see SeriesQuote)."""

    starts_at: datetime
    ends_at: datetime
    quote: Quote


@dataclass(frozen=True)
class SeriesQuote:
    """What a series would cost and whether it may be made: ``cost`` USD and ``held_hours``
    summed over ``occurrences``; ``hold_from`` the first hold (``now`` when none); ``gpus``
    held in each occurrence; ``over`` every reason it is refused, each naming the occurrence's
    local day and time, or the month whose budget it exceeds; () when it may be made."""

    occurrences: tuple[Occurrence, ...]
    hold_from: datetime
    held_hours: Decimal
    cost: Decimal
    gpus: int
    over: tuple[str, ...]


def zone_named(name: str) -> ZoneInfo:
    """The IANA zone ``name``; raises ValueError saying so for an unknown one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone (e.g. Europe/Berlin).") from None


def series_windows(
    *, starts_at: datetime, ends_at: datetime, repeat: Repeat
) -> list[tuple[datetime, datetime]]:
    """The (start, end) in UTC of each occurrence: on ``repeat.weekdays`` from ``starts_at``'s
    local day to ``repeat.until``, at ``starts_at``'s and ``ends_at``'s local wall times.
    Raises BookingRefused saying why the repeat itself may not be made (no weekday, ``until``
    before the first day or over MAX_WEEKS after it, a window over 24 hours, an unknown
    zone)."""
    try:
        tz = zone_named(repeat.time_zone)
    except ValueError as exc:
        raise BookingRefused((str(exc),)) from None
    first, last = starts_at.astimezone(tz), ends_at.astimezone(tz)
    _check_repeat(first, last, repeat)
    end_after_days = (last.date() - first.date()).days
    windows = []
    for day in _days(first.date(), repeat.until):
        if day.weekday() in repeat.weekdays:
            end_day = day + timedelta(days=end_after_days)
            windows.append((_utc(day, first.time(), tz), _utc(end_day, last.time(), tz)))
    if not windows:
        raise BookingRefused(("None of the chosen weekdays falls before the series ends.",))
    return windows


def _check_repeat(first: datetime, last: datetime, repeat: Repeat) -> None:
    problems = []
    if not repeat.weekdays or not repeat.weekdays <= set(range(7)):
        problems.append("Choose the weekdays it repeats on.")
    latest = first.date() + timedelta(weeks=MAX_WEEKS)
    if repeat.until < first.date():
        problems.append("The series must end on or after its first day.")
    elif repeat.until > latest:
        problems.append(f"A series runs at most {MAX_WEEKS} weeks: until {latest} at the latest.")
    wall = last.replace(tzinfo=None) - first.replace(tzinfo=None)
    if wall > MAX_SERIES_WINDOW:
        problems.append("Each window of a series lasts at most 24 hours.")
    if problems:
        raise BookingRefused(tuple(problems))


def _days(first: date, last: date) -> Iterable[date]:
    day = first
    while day <= last:
        yield day
        day += timedelta(days=1)


def _utc(day: date, wall: time, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, wall, tzinfo=tz).astimezone(UTC)


def series_quote(
    *,
    team: Team,
    offering: SizeOffering,
    instances: int,
    starts_at: datetime,
    ends_at: datetime,
    repeat: Repeat,
    now: datetime,
) -> SeriesQuote:
    """Every occurrence's quote (bookings.services.booking_quote: the window, the team's
    quota and Azure's against other bookings then) and the budget of each month the series
    touches against the occurrences' costs starting in it. Never raises."""
    gpus = offering.gpu_count * instances
    try:
        if not now < starts_at <= now + MAX_AHEAD:  # also keeps dates far from datetime's ends
            raise BookingRefused(("A series starts in the future, at most a year ahead.",))
        windows = series_windows(starts_at=starts_at, ends_at=ends_at, repeat=repeat)
    except BookingRefused as refused:
        return SeriesQuote((), now, Decimal("0.0000"), Decimal("0.00"), gpus, refused.reasons)
    tz = zone_named(repeat.time_zone)
    occurrences = tuple(
        Occurrence(start, end, _quote(team, offering, instances, start, end, now))
        for start, end in windows
    )
    over = [f"{_when(o.starts_at, tz)}: {r}" for o in occurrences for r in o.quote.over]
    over += _budget_problems(team, occurrences, now)
    return SeriesQuote(
        occurrences,
        occurrences[0].quote.hold_from,
        sum((o.quote.held_hours for o in occurrences), Decimal("0.0000")),
        sum((o.quote.cost for o in occurrences), Decimal("0.00")),
        gpus,
        tuple(over),
    )


def _quote(
    team: Team,
    offering: SizeOffering,
    instances: int,
    start: datetime,
    end: datetime,
    now: datetime,
) -> Quote:
    return booking_quote(
        team=team,
        offering=offering,
        instances=instances,
        starts_at=start,
        ends_at=end,
        now=now,
        budget=False,
    )


def _when(instant: datetime, tz: ZoneInfo) -> str:
    return instant.astimezone(tz).strftime("%a %d %b %Y %H:%M")


def _budget_problems(team: Team, occurrences: tuple[Occurrence, ...], now: datetime) -> list[str]:
    """A month's occurrences together against that month's budget (by the month each starts
    in, UTC, as a single booking's is)."""
    months: dict[tuple[int, int], list[Occurrence]] = {}
    for o in occurrences:
        months.setdefault((o.starts_at.year, o.starts_at.month), []).append(o)
    problems = []
    for found in months.values():
        cost = sum((o.quote.cost for o in found), Decimal("0.00"))
        for reason in budget_problem(team, cost, found[0].starts_at, now):
            problems.append(f"In {found[0].starts_at:%B %Y}: {reason}")
    return problems


def booking_series_create(
    *,
    actor: User,
    team: Team,
    title: str,
    offering: SizeOffering,
    instances: int,
    starts_at: datetime,
    ends_at: datetime,
    repeat: Repeat,
    now: datetime,
) -> list[Booking]:
    """Book every occurrence of the series (the caller checked ``actor`` may), soonest first:
    all or nothing, decided holding the team's row. Audited once as booking.series_create.
    Raises BookingRefused with every reason of every occurrence."""
    with transaction.atomic():
        team_lock(team)
        quote = series_quote(
            team=team, offering=offering, instances=instances, starts_at=starts_at,
            ends_at=ends_at, repeat=repeat, now=now,
        )  # fmt: skip
        if quote.over:
            raise BookingRefused(quote.over)
        series = BookingSeries.objects.create(
            team=team,
            created_by=actor,
            weekdays=",".join(str(d) for d in sorted(repeat.weekdays)),
            until=repeat.until,
            time_zone=repeat.time_zone,
            created_at=now,
        )
        made = [
            booking_row(
                actor=actor,
                team=team,
                title=title,
                offering=offering,
                instances=instances,
                starts_at=o.starts_at,
                ends_at=o.ends_at,
                quote=o.quote,
                now=now,
                series=series,
            )  # fmt: skip
            for o in quote.occurrences
        ]
        after = {
            "title": title,
            "vm_size": offering.vm_size,
            "region": offering.region,
            "instances": instances,
            "weekdays": series.weekdays,
            "until": repeat.until.isoformat(),
            "time_zone": repeat.time_zone,
            "occurrences": len(made),
            "cost_usd": str(quote.cost),
        }
        audit_record(actor=actor, team=team, action="booking.series_create", obj=series,
                     before={}, after=after, now=now)  # fmt: skip
    return made


def booking_series_cancel(*, actor: User, booking: Booking, now: datetime) -> int:
    """Cancel every occurrence of ``booking``'s series that has not ended (each audited as
    booking.cancel; one held is released by bookings.lifecycle), or ``booking`` alone when it
    is no series'. The number cancelled."""
    if booking.series_id is None:
        return int(booking_cancel(actor=actor, booking=booking, now=now))
    found = Booking.objects.filter(series_id=booking.series_id, state__in=LIVE)
    cancelled = 0
    with transaction.atomic():
        for one in found.select_related("team").order_by("starts_at"):
            cancelled += booking_cancel(actor=actor, booking=one, now=now)
    return cancelled
