"""A booking's workspaces (issue 34): named at booking time or later, started (or made) into
the booking's capacity reservation group at the window's start, so their GPUs are there even
when the region's capacity vanished before it; their owners warned before the end; stopped,
taken out of the group and the reservation released at the end. In the emulator, with the
window's edges passed in as ``now``."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from bookings.lifecycle import RESERVATION, bookings_advance
from bookings.models import BookingState
from bookings.seat_lifecycle import seats_start
from bookings.seats import SeatRefused, booking_seat_add
from cloud import azure_reservations
from cloud.azure_vm import vm_names
from common.permissions import ActionNotAllowed
from notifications.models import Notice
from tests.bookings.test_bookings import A100, _book, _settle
from tests.factories import SSH_KEY, OfferingFactory, WorkspaceFactory
from workspaces.actions import workspace_start, workspace_stop
from workspaces.azure import azure_settings
from workspaces.backends.vm_request import workspace_request
from workspaces.models import Workspace
from workspaces.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def _stopped_vm(cast, user, name):
    workspace = workspace_request(
        user=user,
        team=cast.team,
        name=name,
        offering=OfferingFactory(),
        ssh_public_key=SSH_KEY,
        request_key=uuid.uuid4(),
        now=timezone.now(),
    )
    workspace.refresh_from_db()
    assert workspace.status == Status.RUNNING
    workspace_stop(user=user, workspace=workspace, now=timezone.now())
    workspace.refresh_from_db()
    assert workspace.status == Status.STOPPED
    return workspace


def _allocated(booking):
    state = azure_reservations.reservation_get(
        azure_settings(), group=booking.azure_name, name=RESERVATION
    )
    return sorted(state.allocated_vms) if state else None


def test_booked_gpus_are_there_at_the_start_and_released_at_the_end(cast, sim):
    sim.set_capacity("eastus", A100, 3)
    mine = _stopped_vm(cast, cast.researcher, "mine")
    other = _stopped_vm(cast, cast.researcher, "not-booked")
    booking = _book(cast, instances=2)
    booking_seat_add(actor=cast.researcher, booking=booking, workspace=mine, now=timezone.now())
    seat = booking_seat_add(
        actor=cast.teammate,
        booking=booking,
        name="lab-2",
        ssh_public_key=SSH_KEY,
        now=timezone.now(),
    )
    _settle(booking, booking.hold_from, {BookingState.HELD})
    sim.set_capacity("eastus", A100, 0)  # the region's capacity vanishes before the window
    workspace_start(user=cast.researcher, workspace=other, now=timezone.now())
    other.refresh_from_db()
    assert other.status != Status.RUNNING  # Azure has no room for a VM outside the booking

    bookings_advance(now=booking.starts_at - timedelta(minutes=1))
    mine.refresh_from_db()
    assert mine.status == Status.STOPPED  # not before the window
    bookings_advance(now=booking.starts_at)
    seats_start(booking=booking, now=booking.starts_at)  # a tick run twice starts nothing twice
    mine.refresh_from_db()
    made = Workspace.objects.get(name="lab-2", team=cast.team)
    assert (mine.status, made.status, made.owner) == (Status.RUNNING, Status.RUNNING, cast.teammate)
    assert mine.events.filter(to_status=Status.STARTING).count() == 1
    assert Workspace.objects.filter(name="lab-2").count() == 1
    assert _allocated(booking) == sorted([vm_names(mine.pk).vm, vm_names(made.pk).vm])
    seat.refresh_from_db()
    assert seat.workspace == made

    bookings_advance(now=booking.ends_at - timedelta(minutes=10))
    for owner in (cast.researcher, cast.teammate, cast.team_admin):
        assert Notice.objects.filter(user=owner, text__contains="ends in 15 minutes").count() == 1
    mine.refresh_from_db()
    assert mine.status == Status.RUNNING  # warned, not yet stopped

    _settle(booking, booking.ends_at, {BookingState.ENDED})
    for workspace in (mine, made):
        workspace.refresh_from_db()
        assert (workspace.status, workspace.capacity_reservation_group) == (Status.STOPPED, "")
        name = vm_names(workspace.pk).vm
        assert azure_reservations.vm_group(azure_settings(), name=name) is None
    assert _allocated(booking) is None  # the reservation is gone, and its group with it
    assert Notice.objects.filter(user=cast.teammate, text__contains="lab-2 was stopped").exists()


def test_a_booking_takes_its_teams_vms_of_its_size_and_at_most_its_instances(cast, sim):
    booking = _book(cast, instances=1)
    t4 = WorkspaceFactory(
        team=cast.team, owner=cast.researcher, status=Status.STOPPED, vm_size="Standard_NC4as_T4_v3"
    )
    with pytest.raises(SeatRefused, match="the booking holds Standard_NC24ads_A100_v4 in eastus"):
        booking_seat_add(actor=cast.researcher, booking=booking, workspace=t4, now=timezone.now())
    theirs = WorkspaceFactory(team=cast.other_team, owner=cast.outsider, status=Status.STOPPED)
    with pytest.raises(ActionNotAllowed):  # not theirs to act on, nor their team's booking
        booking_seat_add(actor=cast.outsider, booking=booking, workspace=theirs, now=timezone.now())
    with pytest.raises(SeatRefused, match="Paste one OpenSSH public key"):
        booking_seat_add(
            actor=cast.researcher,
            booking=booking,
            name="x",
            ssh_public_key="no",
            now=timezone.now(),
        )
    one = dict(actor=cast.researcher, booking=booking, ssh_public_key=SSH_KEY, now=timezone.now())
    booking_seat_add(name="one", **one)
    with pytest.raises(SeatRefused, match="holds 1 VM"):
        booking_seat_add(name="two", **one)
