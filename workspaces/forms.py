"""What every kind's request form shares (the workspace name, the price ceiling), the
equivalent sizes panel's query and the resize form. Each kind's own request form is next to
its backend (workspaces.backends.vm_form, clusters.backends.forms)."""

import re
from decimal import Decimal
from typing import Any, cast

from django import forms
from django.db.models import QuerySet

from common.validation import TextField
from teams.models import Team
from workspaces import equivalents, hooks
from workspaces.hooks import MountChoice
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


# The page's request forms carry this hidden field: its tick boxes are then the whole choice
# (none ticked: no share). Data without it (the API's body) leaves out what it does not name:
# every share the owner may mount, and the home.
MOUNTS_SHOWN = "mounts_shown"


class _MountsWidget(forms.CheckboxSelectMultiple):
    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        if name not in data and MOUNTS_SHOWN not in data:
            return None
        return super().value_from_datadict(data, files, name)


class _HomeWidget(forms.CheckboxInput):
    def value_from_datadict(self, data: Any, files: Any, name: str) -> bool:
        if name not in data and MOUNTS_SHOWN not in data:
            return True
        return super().value_from_datadict(data, files, name)


class MountsField(forms.MultipleChoiceField):
    """Team share names to mount; None (not given) for every share the owner may mount."""

    widget = _MountsWidget

    def to_python(self, value: Any) -> list[str] | None:
        return None if value is None else super().to_python(value)

    def validate(self, value: Any) -> None:
        if value is not None:
            super().validate(value)


class MountsFormMixin(forms.Form):
    """What every kind's request form asks about storage (docs/storage.md): which of the
    team's shares to mount (``mounts``: the names ``user`` may mount in the chosen team,
    hooks.mount_options) and whether to mount the owner's home (``home``). Takes ``user``
    besides the form's own arguments; the chosen team is the data's ``team`` (a pk), else the
    initial one."""

    mounts = MountsField(
        required=False,
        label="Team shares to mount",
        help_text="Each at /data/<name>. Untick what this workspace does not need.",
        error_messages={"invalid_choice": "%(value)s is not a share of the team you may mount."},
    )
    home = forms.BooleanField(
        required=False,
        initial=True,
        widget=_HomeWidget,
        label="Mount my home at /data/home",
        help_text="Your own share in this team, the same in every workspace of yours.",
    )
    mounts_shown = forms.CharField(required=False, initial="1", widget=forms.HiddenInput)

    def __init__(self, *args: Any, user: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        team = self._mount_team()
        options = hooks.mount_options(team=team, user=user) if team and user else []
        field = cast(forms.MultipleChoiceField, self.fields["mounts"])
        field.choices = [(name, name) for name in options]
        field.initial = options
        # After the kind's own fields, before the justification (a page that lists every
        # field in order: templates/workspaces/request_kind.html).
        names = [n for n in self.fields if n not in ("mounts", "home", "justification")]
        self.order_fields([*names, "mounts", "home", "justification"])

    def _mount_team(self) -> Team | None:
        raw = self.data.get(self.add_prefix("team")) if self.is_bound else None
        if raw is None:
            raw = self.initial.get("team")
        if isinstance(raw, Team):
            return raw
        return Team.objects.filter(pk=raw).first() if str(raw or "").isdigit() else None


def mount_choice(cleaned: dict[str, Any]) -> MountChoice:
    """The MountChoice of a cleaned request form (the default for a form without the fields)."""
    shares = cleaned.get("mounts")
    return MountChoice(
        shares=None if shares is None else tuple(shares), home=cleaned.get("home", True)
    )


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

    def __init__(self, *args: Any, offerings: QuerySet[SizeOffering], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["offering"].queryset = offerings  # type: ignore[attr-defined]


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
