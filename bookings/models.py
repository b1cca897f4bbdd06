"""A booking: N instances of a GPU VM size in a region for a time window, backed by an Azure
on-demand capacity reservation held from shortly before the window to its end
(docs/bookings.md)."""

import uuid

from django.conf import settings
from django.db import models


class BookingState(models.TextChoices):
    SCHEDULED = "scheduled", "Scheduled"  # before the hold begins
    HOLDING = "holding", "Reserving capacity"  # the reservation's create is in Azure's hands
    HELD = "held", "Capacity held"  # Azure holds the instances (billed, used or not)
    RELEASING = "releasing", "Releasing"  # the window ended or it was cancelled
    ENDED = "ended", "Ended"
    CANCELLED = "cancelled", "Cancelled"  # cancelled before anything was held
    FAILED = "failed", "Failed"  # Azure could not hold it (no room, quota)


# Holding (or about to hold) instances in Azure: counted against quota and other bookings.
LIVE = frozenset({BookingState.SCHEDULED, BookingState.HOLDING, BookingState.HELD})


class BookingSeries(models.Model):
    """A weekly repeating booking: one Booking per occurrence (each holds and releases its own
    capacity reservation), on ``weekdays`` from the first occurrence's day to ``until``, at the
    same local wall times in ``time_zone`` across daylight-saving changes (bookings.series)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="+")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    weekdays = models.CharField(max_length=13, help_text="Monday 0 .. Sunday 6, e.g. '1,3'")
    until = models.DateField(help_text="The last day an occurrence may start (local)")
    time_zone = models.CharField(max_length=64, help_text="IANA zone of the wall times")
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"weekly on {self.weekdays} until {self.until}"

    @property
    def day_names(self) -> list[str]:
        """The weekdays' short English names, Monday first."""
        names = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
        return [names[int(d)] for d in self.weekdays.split(",")]


class Booking(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    team = models.ForeignKey("teams.Team", on_delete=models.CASCADE, related_name="bookings")
    # The weekly series it is one occurrence of (None: booked alone).
    series = models.ForeignKey(
        BookingSeries, null=True, blank=True, on_delete=models.CASCADE, related_name="bookings"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    title = models.CharField(max_length=120)
    region = models.CharField(max_length=32)
    vm_size = models.CharField(max_length=64)
    gpu_model = models.CharField(max_length=16)
    instances = models.PositiveSmallIntegerField(help_text="VMs of vm_size held")
    gpus = models.PositiveIntegerField(help_text="GPUs: instances x the size's GPUs")
    vcpus = models.PositiveIntegerField(help_text="vCPUs counted against Azure's quota")
    price_per_hour = models.DecimalField(
        max_digits=10, decimal_places=4, help_text="USD/hour of one instance, as booked"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    hold_from = models.DateTimeField(help_text="When the reservation is made (before starts_at)")
    state = models.CharField(
        max_length=16, choices=BookingState.choices, default=BookingState.SCHEDULED
    )
    held_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)
    # When its workspaces were started (or created) into the reservation, at the window's start.
    started_at = models.DateTimeField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["starts_at", "id"]
        indexes = [models.Index(fields=["state", "hold_from"], name="booking_state_hold")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")), name="booking_window"
            ),
            models.CheckConstraint(condition=models.Q(instances__gte=1), name="booking_instances"),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.instances} x {self.vm_size})"

    @property
    def azure_name(self) -> str:
        """The capacity reservation group's and the reservation's name in Azure."""
        return f"booking-{self.pk.hex[:12]}"


class BookingSeat(models.Model):
    """A workspace of a booking: an existing VM of the team in the booking's region and size
    (``workspace``), or one made at the window's start for ``owner`` from ``environment``
    (``workspace`` is set once made). Started into the booking's capacity reservation group
    at the start, stopped and disassociated at the end (bookings.lifecycle)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    booking = models.ForeignKey(Booking, on_delete=models.CASCADE, related_name="seats")
    workspace = models.ForeignKey(
        "workspaces.Workspace", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    # For one made at the start: its name, environment (None: the team's default for the
    # size) and the owner's SSH public key, checked when the seat was added.
    name = models.CharField(max_length=63, blank=True)
    environment = models.ForeignKey(
        "environments.Environment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    ssh_public_key = models.TextField(blank=True)
    # What the lifecycle did at the start, in words ("" until then): started, made, or why not.
    outcome = models.TextField(blank=True)
    # Stopped and taken out of the reservation group at the end (or nothing was there to).
    left_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["booking", "workspace"], name="booking_seat_workspace_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name or self.workspace_id} in {self.booking_id}"
