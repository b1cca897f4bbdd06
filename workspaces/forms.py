"""The workspace request form."""

import re
from decimal import Decimal

from django import forms
from django.urls import reverse

from common.validation import TextField
from workspaces import equivalents
from workspaces.models import SizeOffering
from workspaces.requests import spot_unavailable
from workspaces.ssh_keys import NOT_ECHOED, validate_ssh_public_key

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

    def __init__(self, **kwargs):
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


class WorkspaceRequestForm(forms.Form):
    team = forms.ModelChoiceField(queryset=None, empty_label=None)
    name = TextField(
        label="Workspace name",
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
    accept_equivalents = forms.BooleanField(
        required=False,
        label="Accept equivalent sizes",
        widget=forms.CheckboxInput(attrs={"aria-describedby": "equivalents-help"}),
        help_text=(
            "When Azure has no capacity or quota for the chosen size, take the next of the "
            "equivalent sizes listed (as much GPU memory or more, per GPU and in total, up to "
            "the price ceiling), cheapest first, rather than wait."
        ),
    )
    max_price = CeilingField()
    ssh_public_key = forms.CharField(
        label="SSH public key",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=(
            "The line of your .pub file: Ed25519, or RSA of 2048 bits or more. It goes on the "
            "VM for the SSH user."
        ),
    )
    justification = TextField(
        multiline=True,
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
                "hx-include": "[name=region],[name=suits]",
            }
        )
        self.fields["region"].choices = [(r, r) for r in regions]
        self.fields["offering"].queryset = offerings

    def clean_name(self):
        return clean_workspace_name(self.cleaned_data["name"])

    def clean_ssh_public_key(self):
        try:
            return validate_ssh_public_key(self.cleaned_data["ssh_public_key"])
        except forms.ValidationError as exc:
            if exc.code in NOT_ECHOED:
                # The page shows the error with an empty textarea: a private key pasted by
                # mistake must not travel back in the HTML (nor a 100 KB blob).
                self.data = self.data.copy()
                self.data[self.add_prefix("ssh_public_key")] = ""
            raise

    def clean(self):
        data = super().clean()
        offering, region = data.get("offering"), data.get("region")
        if offering and region and offering.region != region:
            self.add_error("offering", "That size is not offered in that region.")
        elif offering and data.get("spot") and getattr(offering, "spot_hourly", None) is None:
            self.add_error("spot", spot_unavailable(offering))
        return data

    def clean_max_price(self):
        # A ceiling means something only to a request that accepts equivalent sizes.
        if not self.data.get(self.add_prefix("accept_equivalents")):
            return None
        return self.cleaned_data["max_price"]


class _AksRequestForm(forms.Form):
    """Fields shared by the MIG slice and namespace request forms; ``team`` re-renders the
    choices of the chosen team (htmx)."""

    team = forms.ModelChoiceField(queryset=None, empty_label=None)
    name = TextField(
        label="Workspace name",
        max_length=40,
        help_text="Lower-case letters, digits and hyphens, e.g. llm-finetune.",
    )
    justification = TextField(
        multiline=True,
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Needed only above your team's quota: why you need it, for the platform admin.",
    )
    request_key = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(self, *args, teams, url_name: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams
        self.fields["team"].widget.attrs.update(
            {
                "hx-get": reverse(url_name),
                "hx-target": "#choices",
                "hx-select": "#choices",
                "hx-swap": "outerHTML",
                "hx-trigger": "change",
            }
        )

    def clean_name(self):
        return clean_workspace_name(self.cleaned_data["name"])


class MigRequestForm(_AksRequestForm):
    profile = forms.ChoiceField(
        label="MIG profile",
        widget=forms.RadioSelect,
        error_messages={
            "invalid_choice": "No node pool offers that MIG profile to your team.",
            "required": "Choose a MIG profile.",
        },
    )
    image = TextField(
        max_length=200,
        required=False,
        help_text="Container image; JupyterLab with PyTorch by default.",
    )
    field_order = ["team", "name", "profile", "image", "justification"]

    def __init__(self, *args, choices, **kwargs):
        """``choices``: clusters.selectors.MigChoice of the chosen team."""
        super().__init__(*args, url_name="workspaces:request-mig", **kwargs)
        self.choices = choices
        self.fields["profile"].choices = [
            (f"{c.gpu_model}|{c.profile}", f"{c.gpu_model} {c.profile}") for c in choices
        ]

    def clean_image(self):
        image = self.cleaned_data["image"].strip()
        if image and not IMAGE_RE.match(image):
            raise forms.ValidationError(
                "An image reference looks like registry/name:tag, e.g. "
                "quay.io/jupyter/pytorch-notebook:cuda12-latest."
            )
        return image


# registry/path[:tag][@sha256:digest], as the OCI distribution spec names them (simplified).
IMAGE_RE = re.compile(
    r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?(@sha256:[a-f0-9]{64})?$"
)


class NamespaceRequestForm(_AksRequestForm):
    pool = forms.ChoiceField(
        label="GPUs of",
        widget=forms.RadioSelect,
        error_messages={
            "invalid_choice": "That node pool does not serve namespaces to your team.",
            "required": "Choose the GPUs the namespace takes.",
        },
    )
    gpus = forms.IntegerField(
        label="GPUs",
        min_value=1,
        max_value=64,
        help_text="The namespace's GPU quota (requests.nvidia.com/gpu).",
    )
    field_order = ["team", "name", "pool", "gpus", "justification"]

    def __init__(self, *args, pools, **kwargs):
        """``pools``: clusters.selectors.PoolRow of the chosen team's namespace pools."""
        super().__init__(*args, url_name="workspaces:request-namespace", **kwargs)
        self.pools = pools
        self.fields["pool"].choices = [(str(r.pool.pk), r.pool.name) for r in pools]

    def clean_pool(self):
        chosen = self.cleaned_data["pool"]
        return next(r.pool for r in self.pools if str(r.pool.pk) == chosen)


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
