"""Bookings pages: a team's calendar with the booking form (the cost is shown before
confirming), cancelling, and the platform's calendar for platform admins. Strangers get 404,
as on every team page (docs/bookings.md)."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from bookings.forms import BookingForm, SeatForm
from bookings.models import Booking
from bookings.seats import SeatRefused, booking_seat_add
from bookings.selectors import bookable_offerings, booking_calendar, booking_visible_to
from bookings.series import booking_series_cancel, booking_series_create, series_quote
from bookings.services import (
    BookingRefused,
    booking_cancel,
    booking_cost,
    booking_create,
    booking_quote,
)
from common.permissions import access_require
from teams.models import Team
from teams.selectors import team_get
from workspaces.selectors import workspace_of_team


def _team(request: HttpRequest, slug: str, perm: str) -> Team:
    try:
        team = team_get(user=request.user, slug=slug)
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
    access_require(user=request.user, perm=perm, obj=team)
    return team


@login_required
@require_http_methods(["GET", "POST"])
def team_bookings(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the team's calendar and, for its members, the form. POST: book (members)."""
    team = _team(request, slug, "teams.view_team" if request.method == "GET" else "bookings.book")
    form = BookingForm(request.POST or None, offerings=bookable_offerings())
    if request.method == "POST" and form.is_valid():
        try:
            made = _create(request, team, form)
        except BookingRefused as refused:
            for reason in refused.reasons:
                form.add_error(None, reason)
        else:
            cost = sum(booking_cost(booking=b) for b in made)
            what = f"{made[0]}" if len(made) == 1 else f"{made[0]} on {len(made)} days"
            messages.success(request, f"Booked {what}: ${cost:,.2f} while it is held.")
            return redirect("team-bookings", slug=team.slug)
    context = {
        "team": team,
        "form": form,
        "days": booking_calendar(now=timezone.now(), team=team),
        "can_book": request.user.has_perm("bookings.book", team),
    }
    status = 400 if request.method == "POST" else 200
    return render(request, "bookings/team_bookings.html", context, status=status)


def _create(request: HttpRequest, team: Team, form: BookingForm) -> list[Booking]:
    """The booking, or every occurrence of the weekly series the form asks for (wall times in
    the user's zone, the one the form's times were read in)."""
    data = form.cleaned_data
    actor: Any = request.user  # login_required: a User
    what = {
        "actor": actor,
        "team": team,
        "title": data["title"],
        "offering": data["offering"],
        "instances": data["instances"],
        "starts_at": data["starts_at"],
        "ends_at": data["ends_at"],
        "now": timezone.now(),
    }
    repeat = form.repeat(_zone())
    if repeat is not None:
        return booking_series_create(**what, repeat=repeat)
    return [booking_create(**what)]


def _zone() -> ZoneInfo:
    current = timezone.get_current_timezone()
    return current if isinstance(current, ZoneInfo) else ZoneInfo("UTC")


@login_required
@require_POST
def team_booking_quote(request: HttpRequest, slug: str) -> HttpResponse:
    """The cost and every reason it may not be made, for the form as filled (htmx)."""
    team = _team(request, slug, "bookings.book")
    form = BookingForm(request.POST, offerings=bookable_offerings())
    context: dict[str, Any] = {"form": form}
    if form.is_valid():
        data = form.cleaned_data
        what: dict[str, Any] = {
            "team": team,
            "offering": data["offering"],
            "instances": data["instances"],
            "starts_at": data["starts_at"],
            "ends_at": data["ends_at"],
            "now": timezone.now(),
        }
        repeat = form.repeat(_zone())
        quote = series_quote(**what, repeat=repeat) if repeat else booking_quote(**what)
        context["quote"] = quote
    return render(request, "bookings/_quote.html", context)


@login_required
@require_POST
def booking_cancel_view(request: HttpRequest, pk: str) -> HttpResponse:
    """Cancel (its maker, the team's admins, platform admins); 404 for other teams'. With
    ``series`` set, every occurrence of its weekly series that has not ended."""
    booking = booking_visible_to(user=request.user, pk=pk)
    if booking is None:
        raise Http404("No such booking.")
    access_require(user=request.user, perm="bookings.cancel_booking", obj=booking)
    actor: Any = request.user  # login_required: a User
    if request.POST.get("series") and booking.series_id is not None:
        count = booking_series_cancel(actor=actor, booking=booking, now=timezone.now())
        messages.success(request, f"{count} of {booking.title}'s days are cancelled.")
    elif booking_cancel(actor=actor, booking=booking, now=timezone.now()):
        messages.success(request, f"{booking.title} is cancelled; Azure releases what it held.")
    else:
        messages.info(request, f"{booking.title} had already ended.")
    return redirect("team-bookings", slug=booking.team.slug)


@login_required
@require_POST
def booking_workspace_add(request: HttpRequest, pk: str) -> HttpResponse:
    """Add a workspace to a booking (members): ``workspace``, the name of a VM of the team,
    or ``name``, a VM made for the caller at the start; a refusal is shown on the calendar."""
    booking = booking_visible_to(user=request.user, pk=pk)
    if booking is None:
        raise Http404("No such booking.")
    form = SeatForm(request.POST)
    actor: Any = request.user  # login_required: a User
    try:
        if not form.is_valid():
            raise SeatRefused(" ".join(str(m) for ms in form.errors.values() for m in ms))
        existing, new = form.cleaned_data["workspace"], form.cleaned_data["name"]
        workspace = workspace_of_team(team=booking.team, id_or_name=existing) if existing else None
        if existing and workspace is None:
            raise SeatRefused(f"{booking.team.name} has no workspace named “{existing}”.")
        booking_seat_add(actor=actor, booking=booking, workspace=workspace, name=new,
                         now=timezone.now())  # fmt: skip
    except SeatRefused as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, f"Added to {booking.title}: it starts at the window's start.")
    return redirect("team-bookings", slug=booking.team.slug)


@login_required
@require_GET
def all_bookings(request: HttpRequest) -> HttpResponse:
    """Every team's bookings (platform admins)."""
    access_require(user=request.user, perm="bookings.view_all", obj=None)
    context = {"days": booking_calendar(now=timezone.now()), "all_teams": True}
    return render(request, "bookings/all_bookings.html", context)
