"""Forms of the team's Webhooks page (teams.webhook_views): checked again by the services
(teams.webhooks), whose WebhookInvalid becomes the same form error."""

from django import forms
from django.core.exceptions import ValidationError

from teams.models import WebhookKind
from teams.webhooks import CHOOSABLE, NAME_MAX, URL_MAX, WebhookInvalid, webhook_url_check

EVENT_CHOICES = [(e.value, e.label) for e in CHOOSABLE]


class WebhookAddForm(forms.Form):
    kind = forms.ChoiceField(choices=WebhookKind.choices, label="Service")
    name = forms.CharField(max_length=NAME_MAX, help_text="e.g. the channel's name")
    url = forms.CharField(
        max_length=URL_MAX,
        label="Webhook URL",
        help_text="The incoming-webhook URL from Teams (a workflow's) or Slack, or your "
        "endpoint. https only. It is stored encrypted and never shown again in full.",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES, widget=forms.CheckboxSelectMultiple, label="Events"
    )

    def clean_url(self) -> str:
        try:
            return webhook_url_check(self.cleaned_data["url"])
        except WebhookInvalid as error:
            raise ValidationError(str(error)) from error

    def clean_name(self) -> str:
        name: str = self.cleaned_data["name"].strip()
        if not name.isprintable():
            raise ValidationError("Use printable characters only.")
        return name


class WebhookChangeForm(forms.Form):
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES, widget=forms.CheckboxSelectMultiple, label="Events"
    )
    enabled = forms.BooleanField(required=False, label="Enabled")
