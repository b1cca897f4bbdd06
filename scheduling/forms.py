"""The forms of the queue's pages: a workspace's autostart schedule and a team's quiet
hours. Zones and weekdays are checked by the services (scheduling.autostart)."""

from django import forms

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
