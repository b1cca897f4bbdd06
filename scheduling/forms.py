"""The forms of the queue's pages: a workspace's autostart schedule and a team's quiet
hours. Zones and weekdays are checked by the services (scheduling.autostart)."""

from typing import cast

from django import forms
from django.db.models import QuerySet

from teams.models import Team
from workspaces.models import SizeOffering

WEEKDAYS = [
    ("0", "Mon"),
    ("1", "Tue"),
    ("2", "Wed"),
    ("3", "Thu"),
    ("4", "Fri"),
    ("5", "Sat"),
    ("6", "Sun"),
]


class AutostartForm(forms.Form):
    weekdays = forms.MultipleChoiceField(
        choices=WEEKDAYS, widget=forms.CheckboxSelectMultiple, initial=["0", "1", "2", "3", "4"]
    )
    at = forms.TimeField(
        label="At", initial="08:30", widget=forms.TimeInput(attrs={"type": "time"})
    )
    timezone = forms.CharField(max_length=64, label="Time zone", initial="UTC")
    enabled = forms.BooleanField(required=False, initial=True, label="On")


class QuietHoursForm(forms.Form):
    start = forms.TimeField(widget=forms.TimeInput(attrs={"type": "time"}))
    end = forms.TimeField(widget=forms.TimeInput(attrs={"type": "time"}))
    timezone = forms.CharField(max_length=64, label="Time zone", initial="UTC")
    weekdays = forms.MultipleChoiceField(
        choices=WEEKDAYS, widget=forms.CheckboxSelectMultiple, initial=[d for d, _ in WEEKDAYS]
    )


class BookingForm(forms.Form):
    # Their querysets are set per user by the view.
    team: "forms.ModelChoiceField[Team]" = forms.ModelChoiceField(queryset=Team.objects.none())
    title = forms.CharField(max_length=100)
    offering: "forms.ModelChoiceField[SizeOffering]" = forms.ModelChoiceField(
        queryset=SizeOffering.objects.none(), label="Size and region"
    )
    count = forms.IntegerField(min_value=1, max_value=100, label="VMs")
    starts_at = forms.DateTimeField(
        label="From", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    ends_at = forms.DateTimeField(
        label="To", widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    confirm = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def team_choices(self, *, teams: "QuerySet[Team]", offerings: "QuerySet[SizeOffering]") -> None:
        """The teams the user may book for, and the sizes offered."""
        team = cast("forms.ModelChoiceField[Team]", self.fields["team"])
        team.queryset = teams
        offering = cast("forms.ModelChoiceField[SizeOffering]", self.fields["offering"])
        offering.queryset = offerings
