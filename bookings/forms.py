"""The booking form: what to book and when, in the user's time zone (docs/bookings.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

from django import forms
from django.db.models import QuerySet

from bookings.series import Repeat
from bookings.services import MAX_INSTANCES
from common.validation import TextField
from workspaces.models import SizeOffering

DAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
LOCAL = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class BookingForm(forms.Form):
    title = TextField(max_length=120, help_text="What it is for, e.g. 'Deep learning lab 3'.")
    offering = forms.ModelChoiceField(
        queryset=SizeOffering.objects.none(),
        label="Size and region",
        error_messages={"invalid_choice": "That size is not offered there."},
    )
    instances = forms.IntegerField(
        label="VMs", min_value=1, max_value=MAX_INSTANCES, initial=1, help_text="How many VMs."
    )
    starts_at = forms.DateTimeField(label="From", widget=LOCAL, input_formats=["%Y-%m-%dT%H:%M"])
    ends_at = forms.DateTimeField(label="Until", widget=LOCAL, input_formats=["%Y-%m-%dT%H:%M"])
    repeat_on = forms.TypedMultipleChoiceField(
        label="Repeat every week on",
        choices=list(enumerate(DAY_NAMES)),
        coerce=int,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Leave empty to book this window once.",
    )
    repeat_until = forms.DateField(
        label="Repeat until",
        required=False,
        widget=forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d"),
        input_formats=["%Y-%m-%d"],
        help_text="The last day a window may start, at most 26 weeks after the first.",
    )

    def __init__(self, *args: Any, offerings: QuerySet[SizeOffering], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = cast("forms.ModelChoiceField[SizeOffering]", self.fields["offering"])
        field.queryset = offerings
        field.label_from_instance = _label  # type: ignore[method-assign,assignment]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or self.cleaned_data
        starts_at: datetime | None = data.get("starts_at")
        ends_at: datetime | None = data.get("ends_at")
        if starts_at and ends_at and ends_at <= starts_at:
            self.add_error("ends_at", "The window must end after it starts.")
        if bool(data.get("repeat_on")) != bool(data.get("repeat_until")) and not self.errors:
            self.add_error("repeat_until", "To repeat, choose the weekdays and the last day.")
        return data

    def repeat(self, tz: ZoneInfo) -> Repeat | None:
        """The weekly repeat asked for, at wall times in ``tz`` (the user's zone), or None."""
        days, until = self.cleaned_data.get("repeat_on"), self.cleaned_data.get("repeat_until")
        if not days or until is None:
            return None
        return Repeat(frozenset(days), until, tz.key)


class SeatForm(forms.Form):
    """A workspace for a booking: an existing VM of the team by name, or a new one's name."""

    workspace = TextField(max_length=63, required=False, label="A VM of the team")
    name = TextField(max_length=63, required=False, label="Or a new VM's name")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or self.cleaned_data
        if bool(data.get("workspace")) == bool(data.get("name")):
            raise forms.ValidationError("Name one VM of the team, or a new VM to make.")
        return data


def _label(offering: SizeOffering) -> str:
    gpus = f"{offering.gpu_count} x {offering.gpu_model}"
    return f"{offering.vm_size} ({gpus}) in {offering.region}, ${offering.price_per_hour}/h"
