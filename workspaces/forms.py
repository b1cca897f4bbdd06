"""What every kind's request form shares (the workspace name, the price ceiling), the
equivalent sizes panel's query and the resize form. Each kind's own request form is next to
its backend (workspaces.backends.vm_form, clusters.backends.forms)."""

import re
from decimal import Decimal
from typing import Any

from django import forms

from common.validation import TextField
from workspaces import equivalents
from workspaces.models import SizeOffering

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$")


def clean_workspace_name(value: str) -> str:
    """A workspace name as a DNS-1123 label of at most 40 characters (lower-cased)."""
    name = value.strip().lower()
    if not NAME_RE.match(name):
        raise forms.ValidationError(
            "Use 1–40 lower-case letters, digits and hyphens, not starting or ending with one."
        )
    return name


class CeilingField(forms.DecimalField):
    """The price ceiling (USD/hour) for equivalent sizes: blank for the default, the chosen
    size's price x 1.5 (workspaces.equivalents)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("label", "Price ceiling (USD/hour)")
        kwargs.setdefault("help_text", "Blank: the chosen size's price × 1.5.")
        super().__init__(
            min_value=Decimal("0.01"),
            max_value=equivalents.MAX_CEILING,
            max_digits=10,
            decimal_places=4,
            **kwargs,
        )


class EquivalentsQueryForm(forms.Form):
    """The GET parameters of the equivalent sizes panel: the chosen offering, the ceiling, and
    whether it is a Spot request."""

    offering = forms.ModelChoiceField(queryset=SizeOffering.objects.none())
    max_price = CeilingField()
    spot = forms.BooleanField(required=False)

    def __init__(self, *args, offerings, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["offering"].queryset = offerings


class ResizeForm(forms.Form):
    """The size to move a workspace to: one of ``choices`` (workspaces.resizes.resize_choices);
    anything else is a form error."""

    target = forms.ChoiceField(
        choices=(),
        label="New size",
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "That size is not one this workspace can move to."},
    )
    justification = TextField(
        multiline=True,
        required=False,
        max_length=2000,
        label="Reason, for a size over the team's quota or budget",
        help_text="A size marked over quota waits for a platform admin's approval with it.",
    )

    def __init__(self, *args, choices=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["target"].choices = [(c.key, c.label) for c in choices]
