"""The workspace request form."""

import base64
import binascii
import re

from django import forms
from django.urls import reverse

from workspaces.models import SizeOffering
from workspaces.services import spot_unavailable

SSH_KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")


def validate_ssh_public_key(value: str) -> str:
    """Accept one OpenSSH public key line ("type base64 [comment]") whose blob names its type."""
    parts = value.strip().split()
    if len(parts) < 2 or parts[0] not in SSH_KEY_TYPES:
        raise forms.ValidationError(
            "Paste one OpenSSH public key, e.g. the line in ~/.ssh/id_ed25519.pub "
            "(it starts with ssh-ed25519, ssh-rsa or ecdsa-sha2-…)."
        )
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise forms.ValidationError("The key's base64 part is damaged.") from exc
    if parts[0].encode() not in blob[:64]:
        raise forms.ValidationError("The key's type does not match its content.")
    return " ".join(parts[:3])


class WorkspaceRequestForm(forms.Form):
    team = forms.ModelChoiceField(queryset=None, empty_label=None)
    name = forms.CharField(
        max_length=40,
        help_text="Lower-case letters, digits and hyphens, e.g. llm-finetune.",
    )
    region = forms.ChoiceField(choices=(), help_text="Azure region the VM runs in.")
    offering = forms.ModelChoiceField(
        queryset=SizeOffering.objects.none(),
        label="VM size",
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "That size is not offered in that region."},
    )
    spot = forms.BooleanField(
        required=False,
        label="Spot VM",
        widget=forms.CheckboxInput(attrs={"aria-describedby": "spot-help"}),
        help_text=(
            "Up to ~90% cheaper, at the Spot price shown. Azure can evict it when it needs the "
            "capacity back: the VM is deallocated and keeps its disk, and you start it again "
            "when Azure has room. Not for work that cannot be interrupted."
        ),
    )
    ssh_public_key = forms.CharField(
        label="SSH public key",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Your public key; it goes on the VM for the SSH user.",
    )
    justification = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Needed only above your team's quota: why you need it, for the platform admin.",
    )
    request_key = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(self, *args, teams, regions, offerings, **kwargs):
        """``offerings`` carry ``spot_hourly`` (workspaces.selectors.offering_list with now)."""
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams
        # Another team has another budget: the size table's runway column follows the choice.
        self.fields["team"].widget.attrs.update(
            {
                "hx-get": reverse("workspaces:request"),
                "hx-target": "#size-table",
                "hx-swap": "outerHTML",
                "hx-trigger": "change",
                "hx-include": "[name=region]",
            }
        )
        self.fields["region"].choices = [(r, r) for r in regions]
        self.fields["offering"].queryset = offerings

    def clean_name(self):
        name = self.cleaned_data["name"].strip().lower()
        if not NAME_RE.match(name):
            raise forms.ValidationError(
                "Use 1–40 lower-case letters, digits and hyphens, not starting or ending with one."
            )
        return name

    def clean_ssh_public_key(self):
        return validate_ssh_public_key(self.cleaned_data["ssh_public_key"])

    def clean(self):
        data = super().clean()
        offering, region = data.get("offering"), data.get("region")
        if offering and region and offering.region != region:
            self.add_error("offering", "That size is not offered in that region.")
        elif offering and data.get("spot") and getattr(offering, "spot_hourly", None) is None:
            self.add_error("spot", spot_unavailable(offering))
        return data
