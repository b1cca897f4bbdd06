"""Team charges: what Azure bills a team beside its workspaces' meters, the one definition every
page, email, API and CLI reads (through billing.month_spend and billing.csv_export).

- ``storage``: each team share and researcher home, Azure Files premium (provisioned v1),
  billed per provisioned GiB a month whether used or mounted or not, prorated by the hour:
  storage.ProvisionedSpan (size_gib, from Azure's create to its delete) x the Retail Prices
  API's "Premium LRS Provisioned" meter (Price kind "files", USD per GiB a month) / 730 hours.
  A stopped workspace's OS disk is billed on the workspace's own disk meter (billing.meters).
- ``reservation``: each booking's on-demand capacity reservation, billed "at the same rate as
  the underlying VM size" whether VMs use it or not (Microsoft Learn,
  capacity-reservation-overview, "Pricing and billing"): instances x the size's pay-as-you-go
  price x the hours Azure held it (Booking.held_at until released_at, or now), nothing taken
  off for the unused part. A booked workspace started into the reservation is billed as the VM
  (its workspace's own compute meter, its workspace tag) and the reservation for its unused
  instances only ("Once in use, you pay for only the VM and nothing extra"), so this line
  counts, hour by hour, the instances minus the booked workspaces allocated in it then: those
  whose compute meter opened while the reservation was held (bookings.lifecycle associates a
  seat with the group before it starts it; one already running at the hold stays outside the
  reservation, billed as a VM beside it, docs/bookings.md).

Each charge is cut per local day of the team's time zone and per price change
(billing.metering.pieces), exact in Decimal; callers round each (day, resource) line to the
cent, as the chargeback CSV charges it. A span or booking without a known price is priced at
nothing (``priced`` False) rather than at an invented one; a booking falls back to the price
it was booked at (Booking.price_per_hour), as a workspace meter falls back to its quoted price.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import NamedTuple

from django.db.models import Q

from billing import metering
from billing.models import Meter, Price, PriceKind, UsageInterval
from billing.pricing import BEGINNING, Windows, Zones
from bookings.models import Booking, BookingSeat
from storage.models import ProvisionedSpan

STORAGE = "storage"
RESERVATION = "reservation"
CHARGE_KINDS = (STORAGE, RESERVATION)  # the spend chart's series after the workspace kinds
FILES_PROVISIONED = "Premium LRS Provisioned"  # the meter of a share's provisioned GiB


class ChargeLine(NamedTuple):
    """One resource's charge on one day of its team's time zone: ``meter`` storage or
    reservation, ``resource`` what the CSV names it by, ``quantity`` GiB or VMs, ``hours``
    held that day, ``cost`` USD unrounded; ``priced`` False where no price was known."""

    team_id: int
    day: date
    meter: str
    resource: str
    sku: str
    quantity: int
    hours: Decimal
    cost: Decimal
    priced: bool


class _Held(NamedTuple):
    team_id: int
    meter: str
    resource: str
    sku: str
    region: str
    quantity: int
    started_at: datetime
    ended_at: datetime | None
    price_kind: str
    price_sku: str
    quoted: Decimal | None  # USD/hour of one unit when no Price row is known


def _overlapping(windows: Windows) -> Q:
    query = Q(pk__in=[])
    for team, (start, end) in windows.items():
        query |= Q(team_id=team, started_at__lt=end) & (
            Q(ended_at__isnull=True) | Q(ended_at__gt=start)
        )
    return query


def _spans(windows: Windows) -> list[_Held]:
    rows = ProvisionedSpan.objects.filter(_overlapping(windows)).values_list(
        "team_id", "label", "region", "size_gib", "started_at", "ended_at"
    )
    return [
        _Held(
            team,
            STORAGE,
            label,
            "Premium LRS",
            region,
            gib,
            start,
            end,
            PriceKind.FILES,
            FILES_PROVISIONED,
            None,
        )
        for team, label, region, gib, start, end in rows
    ]


def _bookings(windows: Windows) -> list[_Held]:
    query = Q(pk__in=[])
    for team, (start, end) in windows.items():
        query |= Q(team_id=team, held_at__lt=end) & (
            Q(released_at__isnull=True) | Q(released_at__gt=start)
        )
    rows = Booking.objects.filter(query).values_list(
        "pk", "team_id", "title", "region", "vm_size", "instances", "held_at", "released_at",
        "price_per_hour",
    )  # fmt: skip
    in_use = _seats_allocated([pk for pk, *_ in rows])
    return [
        _Held(
            team,
            RESERVATION,
            f"booking {title} ({pk.hex[:12]})",
            vm_size,
            region,
            unused,
            start,
            end,
            PriceKind.VM,
            vm_size,
            quoted,
        )
        for pk, team, title, region, vm_size, n, held, released, quoted in rows
        if held is not None  # the query asks held_at < end: never None here
        for start, end, unused in unused_pieces(
            held=held, released=released, instances=n, in_use=in_use.get(pk, [])
        )
    ]


_Stretch = tuple[datetime, datetime | None]


def _seats_allocated(booking_ids: list[object]) -> dict[object, list[_Stretch]]:
    """Each booking's seats' compute meters (started_at, ended_at): two queries."""
    if not booking_ids:
        return {}
    seats = BookingSeat.objects.filter(booking_id__in=booking_ids, workspace__isnull=False)
    of_workspace: dict[object, list[object]] = defaultdict(list)
    for booking_id, workspace_id in seats.values_list("booking_id", "workspace_id"):
        of_workspace[workspace_id].append(booking_id)
    found: dict[object, list[_Stretch]] = defaultdict(list)
    meters = UsageInterval.objects.filter(workspace_id__in=of_workspace, meter=Meter.COMPUTE)
    for workspace_id, start, end in meters.values_list("workspace_id", "started_at", "ended_at"):
        for seat_of in of_workspace[workspace_id]:
            found[seat_of].append((start, end))
    return found


def unused_pieces(
    *, held: datetime, released: datetime | None, instances: int, in_use: list[_Stretch]
) -> list[tuple[datetime, datetime | None, int]]:
    """The hold [held, released) cut where the number of booked VMs allocated in it changes:
    (start, end, unused instances), pieces with none unused left out. A compute meter counts
    from its opening within the hold (a VM started into the group) to its close."""
    inside = [(a, b) for a, b in in_use if a >= held and (released is None or a < released)]
    edges = {held, *(a for a, _ in inside)}
    edges |= {b for _, b in inside if b is not None and (released is None or b < released)}
    points = sorted(edges)
    pieces: list[tuple[datetime, datetime | None, int]] = []
    for i, start in enumerate(points):
        end = points[i + 1] if i + 1 < len(points) else released
        running = sum(1 for a, b in inside if a <= start and (b is None or b > start))
        unused = instances - min(running, instances)
        if pieces and pieces[-1][1] == start and pieces[-1][2] == unused:
            pieces[-1] = (pieces[-1][0], end, unused)
        elif unused:
            pieces.append((start, end, unused))
    return pieces


_Book = dict[tuple[str, str, str], list[metering.PricePoint]]


def _book(held: Iterable[_Held]) -> _Book:
    """Price points (USD/hour of one unit) per (price kind, sku, region), one query."""
    keys = {(h.price_kind, h.price_sku, h.region) for h in held}
    if not keys:
        return {}
    rows = Price.objects.filter(
        kind__in={k[0] for k in keys},
        sku__in={k[1] for k in keys},
        region__in={k[2] for k in keys},
        spot=False,
    ).order_by("effective_start")
    book: _Book = defaultdict(list)
    for p in rows:
        book[(p.kind, p.sku, p.region)].append(metering.PricePoint(p.effective_start, p.hourly))
    return book


_LineKey = tuple[int, date, str, str, str, int]  # team, day, meter, resource, sku, quantity


def _points(book: _Book, h: _Held) -> list[metering.PricePoint]:
    """The held resource's prices (USD/hour of one unit); before the first, or with none, a
    booking's quoted price, and a share nothing (no price is invented)."""
    points = book.get((h.price_kind, h.price_sku, h.region), [])
    quoted = [] if h.quoted is None else [metering.PricePoint(BEGINNING, h.quoted)]
    return [*quoted, *points]


def charge_lines(*, windows: Windows, zones: Zones) -> list[ChargeLine]:
    """The teams' charges within each team's window ``{team_id: (start, end)}`` (end at most
    now), per local day and resource. Three queries, five with bookings held (their seats'
    meters), whatever the number of teams."""
    held = _spans_and_bookings(windows)
    book = _book(held)
    totals: dict[_LineKey, list[Decimal]] = {}
    unpriced: set[_LineKey] = set()
    for h in held:
        for piece in metering.pieces(
            started_at=h.started_at,
            ended_at=h.ended_at,
            prices=_points(book, h),
            window=windows[h.team_id],
            tz=zones[h.team_id],
            share=(h.quantity, 1),
        ):
            key = (h.team_id, piece.day, h.meter, h.resource, h.sku, h.quantity)
            total = totals.setdefault(key, [Decimal(0), Decimal(0)])
            total[0] += piece.hours
            total[1] += piece.cost
            if piece.hourly is None:
                unpriced.add(key)
    return [
        ChargeLine(*key, hours, cost, key not in unpriced)
        for key, (hours, cost) in sorted(totals.items(), key=lambda kv: str(kv[0]))
    ]


def charge_burn_rate(*, team_ids: Iterable[int], now: datetime) -> dict[int, Decimal]:
    """USD/hour each team's charges cost at ``now``: its shares and homes that exist and its
    reservations Azure holds, less the booked VMs allocated in them, at the prices in effect
    (teams with none may be missing). Three queries, five with bookings held."""
    held = _spans_and_bookings({t: (now, now + _MICROSECOND) for t in team_ids})
    book = _book(held)
    rates: dict[int, Decimal] = defaultdict(Decimal)
    for h in held:
        if h.started_at > now or (h.ended_at is not None and h.ended_at <= now):
            continue  # another piece of a booking's hold (unused_pieces)
        point = metering.price_at(_points(book, h), now)
        if point is not None:
            rates[h.team_id] += point.hourly * h.quantity
    return rates


_MICROSECOND = timedelta(microseconds=1)


def _spans_and_bookings(windows: Windows) -> list[_Held]:
    return _spans(windows) + _bookings(windows)


@dataclass(frozen=True)
class StorageMonth:
    """What a team's storage costs a month at ``now``: USD per provisioned GiB a month (the
    "Premium LRS Provisioned" price in effect in the account's region; None when none is
    known), the GiB Azure holds now, and ``monthly`` USD to the cent (None without a price).
    A 730-hour month, as Azure prorates it; the spend pages bill the hours that pass."""

    region: str
    per_gib_month: Decimal | None
    gib: int
    monthly: Decimal | None


def storage_month(*, team_id: int, region: str, now: datetime) -> StorageMonth:
    """The team's storage a month at ``now`` (StorageMonth). Two queries."""
    gib = sum(
        h.quantity
        for h in _spans({team_id: (now, now + _MICROSECOND)})
        if h.started_at <= now and (h.ended_at is None or h.ended_at > now)
    )
    price = (
        Price.objects.filter(
            kind=PriceKind.FILES, sku=FILES_PROVISIONED, region=region, effective_start__lte=now
        )
        .order_by("-effective_start")
        .first()
    )
    if price is None:
        return StorageMonth(region, None, gib, None)
    return StorageMonth(region, price.unit_price, gib, metering.to_cents(price.unit_price * gib))


@dataclass(frozen=True)
class ChargeSpend:
    """One share, home or booking over a period: its ``meter`` (storage, reservation),
    ``resource`` name, Files SKU or VM size, GiB or VMs, hours held and USD (the sum of its
    days' cents, as the CSV charges them); ``priced`` False if some hours had no price."""

    meter: str
    resource: str
    sku: str
    quantity: int
    hours: Decimal
    cost: Decimal
    priced: bool


def charge_spend(lines: Iterable[ChargeLine]) -> list[ChargeSpend]:
    """The lines summed per resource, the costliest first."""
    sums: dict[tuple[str, str, str, int], list[Decimal]] = {}
    unpriced: set[tuple[str, str, str, int]] = set()
    for ln in lines:
        key = (ln.meter, ln.resource, ln.sku, ln.quantity)
        total = sums.setdefault(key, [Decimal(0), Decimal(0)])
        total[0] += ln.hours
        total[1] += metering.to_cents(ln.cost)
        if not ln.priced:
            unpriced.add(key)
    rows = [ChargeSpend(*k, h, c, k not in unpriced) for k, (h, c) in sums.items()]
    return sorted(rows, key=lambda r: (-r.cost, r.resource))
