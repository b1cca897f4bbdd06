"""Forms of the team's Webhooks page (teams.webhook_views): checked again by the services
(notifications.webhooks), whose WebhookInvalid becomes the same form error."""

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError

from notifications.models import WebhookKind
from notifications.webhooks import CHOOSABLE, NAME_MAX, URL_MAX, WebhookInvalid, webhook_url_check

EVENT_CHOICES = [(e.value, e.label) for e in CHOOSABLE]


def url_help() -> str:
    """The URL field's help: the rule of notifications.webhook_addresses, with the demo's loopback
    exception where WEBHOOK_ALLOW_LOOPBACK is on."""
    rule = (
        "The incoming-webhook URL from Teams (a workflow's) or Slack, or your endpoint: "
        "https:// to a public internet address (no private, loopback or cluster address)."
    )
    if settings.WEBHOOK_ALLOW_LOOPBACK:
        rule += " For testing, this demo also takes http:// to 127.0.0.1 or localhost."
    return f"{rule} It is stored encrypted and never shown again in full."


class WebhookAddForm(forms.Form):
    kind = forms.ChoiceField(choices=WebhookKind.choices, label="Service")
    name = forms.CharField(max_length=NAME_MAX, help_text="e.g. the channel's name")
    url = forms.CharField(
        max_length=URL_MAX,
        label="Webhook URL",
        help_text="",  # url_help(), as the rule stands where the portal runs
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES, widget=forms.CheckboxSelectMultiple, label="Events"
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["url"].help_text = url_help()

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
