"""How a GPU VM is requested: its form (the page /workspaces/new/ and the API's body), the
choices it needs, and the service it goes to (workspaces.backends.vm_request)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django import forms
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from common.validation import TextField
from environments.models import Environment
from environments.selectors import environment_choice, environments_of_team
from teams.models import Team
from workspaces import selectors
from workspaces.backends.base import ApiField, KindForm
from workspaces.backends.vm_request import VM_KIND, spot_unavailable, workspace_request
from workspaces.forms import CeilingField, MountsFormMixin, clean_workspace_name
from workspaces.hooks import MountChoice
from workspaces.models import DiskSnapshot, SizeOffering, Workspace
from workspaces.ssh_keys import NOT_ECHOED, validate_ssh_public_key


class WorkspaceRequestForm(MountsFormMixin):
    """The GPU VM's request page: team, name, region, size (an offering of the region), Spot,
    equivalent sizes and their price ceiling, the SSH key, what to mount (MountsFormMixin)
    and a justification."""

    team: forms.ModelChoiceField[Team] = forms.ModelChoiceField(queryset=None, empty_label=None)
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
    queue_when_full = forms.BooleanField(
        required=False,
        label="Wait in the queue when there is no room",
        widget=forms.CheckboxInput(attrs={"aria-describedby": "queue-help"}),
        help_text=(
            "When your team's GPUs are in use or Azure has no room, wait in the fair queue and "
            "start by itself when your turn comes, instead of asking a platform admin or "
            "holding your team's quota while Azure is full."
        ),
    )
    ssh_public_key = forms.CharField(
        required=False,
        label="SSH public key (optional)",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=(
            "Only to ssh in: the line of your .pub file, Ed25519 or RSA of 2048 bits or more. "
            "Without one you work in the browser (Open JupyterLab) and nobody can ssh in."
        ),
    )
    environment = forms.CharField(
        required=False,
        max_length=64,
        label="Environment",
        help_text=(
            "What the VM is made from: image, NVIDIA driver, CUDA, frameworks and JupyterLab. "
            "Empty: your team's default for the size (your team's Environments page lists them)."
        ),
    )
    from_snapshot = forms.CharField(
        required=False,
        max_length=80,
        label="Start from a kept snapshot",
        help_text=(
            "The name of a snapshot you kept of a deleted VM's OS disk (your team's Storage "
            "page lists them): the VM boots from a copy of that disk, with its files and "
            "software, instead of an environment. Empty: a new disk."
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

    def __init__(
        self,
        *args: Any,
        teams: QuerySet[Team],
        regions: list[str],
        offerings: QuerySet[SizeOffering],
        **kwargs: Any,
    ) -> None:
        """``offerings`` carry ``spot_hourly`` (workspaces.selectors.offering_list with now)."""
        super().__init__(*args, **kwargs)
        team = cast("forms.ModelChoiceField[Team]", self.fields["team"])
        team.queryset = teams
        # Another team has another budget: the size table's runway column follows the choice.
        team.widget.attrs.update(
            {
                "hx-get": reverse("workspaces:request"),
                "hx-target": "#size-table",
                "hx-swap": "outerHTML",
                "hx-trigger": "change",
                "hx-include": "[name=region],[name=suits]",
            }
        )
        cast(forms.ChoiceField, self.fields["region"]).choices = [(r, r) for r in regions]
        self.fields["environment"].widget = forms.Select(choices=_environment_options(teams))
        cast("forms.ModelChoiceField[SizeOffering]", self.fields["offering"]).queryset = offerings

    def clean_name(self) -> str:
        return clean_workspace_name(self.cleaned_data["name"])

    def clean_ssh_public_key(self) -> str:
        if not self.cleaned_data["ssh_public_key"].strip():
            return ""  # No key: the browser IDE through the app proxy is the way in.
        try:
            return validate_ssh_public_key(self.cleaned_data["ssh_public_key"])
        except forms.ValidationError as exc:
            if exc.code in NOT_ECHOED:
                # The page shows the error with an empty textarea: a private key pasted by
                # mistake must not travel back in the HTML (nor a 100 KB blob).
                copied = cast(Any, self.data).copy()  # a QueryDict (a page) or a dict (the API)
                copied[self.add_prefix("ssh_public_key")] = ""
                self.data = copied
            raise

    def clean(self) -> dict[str, Any]:
        data = super().clean() or self.cleaned_data
        offering, region = data.get("offering"), data.get("region")
        if offering and region and offering.region != region:
            self.add_error("offering", "That size is not offered in that region.")
        elif offering and data.get("spot") and getattr(offering, "spot_hourly", None) is None:
            self.add_error("spot", spot_unavailable(offering))
        data["environment"] = self._environment(data)
        return data

    def _environment(self, data: dict[str, Any]) -> Environment | None:
        """The Environment named by slug among those the team may choose for the size; None
        for the default (the request service takes the team's default)."""
        slug, team, offering = data.get("environment"), data.get("team"), data.get("offering")
        if not slug or team is None or offering is None:
            return None
        found = environment_choice(team=team, kind=VM_KIND, slug=slug, vm_size=offering.vm_size)
        if found is None:
            self.add_error(
                "environment",
                f"{slug} is not an environment {team.name} can choose for {offering.vm_size}.",
            )
        return found

    def clean_from_snapshot(self) -> DiskSnapshot | None:
        """The live snapshot named, or None; the request checks it is the user's."""
        name = self.cleaned_data["from_snapshot"].strip()
        if not name:
            return None
        found = DiskSnapshot.objects.filter(name=name, deleted_at__isnull=True).first()
        if found is None:
            raise forms.ValidationError(f"No kept snapshot is named {name}.")
        return found

    def clean_max_price(self) -> Decimal | None:
        # A ceiling means something only to a request that accepts equivalent sizes.
        if not self.data.get(self.add_prefix("accept_equivalents")):
            return None
        ceiling: Decimal | None = self.cleaned_data["max_price"]
        return ceiling


def _environment_options(teams: QuerySet[Team]) -> list[tuple[str, str]]:
    """The VM environments of the user's teams, for the select: the slug, and the name with
    the GPU families it drives (the request checks it fits the team and the size)."""
    options = {"": "Default for the size"}
    for team in teams:
        for environment in environments_of_team(team=team):
            if VM_KIND in environment.kinds:
                families = ", ".join(environment.gpu_families)
                options.setdefault(environment.slug, f"{environment.name} ({families})")
    return list(options.items())


def _choices(team: Team | None) -> dict[str, Any]:
    """The regions and the sizes offered now (the same for every team)."""
    return {
        "regions": selectors.offering_regions(),
        "offerings": selectors.offering_list(now=timezone.now()),
    }


def _request(
    *,
    user: User,
    team: Team,
    name: str,
    request_key: Any,
    justification: str,
    now: datetime,
    data: Mapping[str, Any],
    mounts: MountChoice,
) -> Workspace:
    return workspace_request(
        user=user,
        team=team,
        name=name,
        offering=data["offering"],
        ssh_public_key=data["ssh_public_key"],
        request_key=request_key,
        justification=justification,
        now=now,
        spot=data["spot"],
        accept_equivalents=data["accept_equivalents"],
        max_price=data["max_price"],
        environment=data.get("environment"),
        queue_when_full=data.get("queue_when_full", False),
        mounts=mounts,
        from_snapshot=data.get("from_snapshot"),
    )


def _api_form_data(values: Mapping[str, Any], form: Any, user: User) -> dict[str, str]:
    """The form's data from the API's names: the offering of ``vm_size`` in ``region``; the
    caller's last SSH key when the body gives none."""
    offerings = form.fields["offering"].queryset
    offering = offerings.filter(vm_size=values["vm_size"], region=values["region"]).first()
    max_price = values["max_price"]
    return {
        "region": values["region"],
        "offering": str(offering.pk) if offering else "",
        "spot": "on" if values["spot"] else "",
        "accept_equivalents": "on" if values["accept_equivalents"] else "",
        "max_price": "" if max_price is None else str(max_price),
        "ssh_public_key": values["ssh_public_key"] or selectors.user_ssh_key_last_used(user=user),
        "environment": values.get("environment") or "",
        "queue_when_full": "on" if values.get("queue_when_full") else "",
        "from_snapshot": values.get("from_snapshot") or "",
    }


VM_FORM = KindForm(
    path="",
    name="request",
    template="workspaces/request.html",
    form_class=WorkspaceRequestForm,
    choices=_choices,
    request=_request,
    # Its page has the size table, the equivalent sizes and the GPU memory estimate.
    view="workspaces.backends.vm_views.workspace_request",
    api_fields=(
        ApiField("vm_size", str, max_length=64, required=True),
        ApiField("region", str, max_length=32, required=True),
        ApiField("spot", bool),
        ApiField("ssh_public_key", str, max_length=16_000, multiline=True),
        ApiField("accept_equivalents", bool),
        ApiField("max_price", Decimal, ge=Decimal("0.01"), le=Decimal("1000")),
        ApiField("environment", str, max_length=64),
        ApiField("queue_when_full", bool),
        ApiField("from_snapshot", str, max_length=80),
    ),
    api_form_data=_api_form_data,
    api_names={"offering": "vm_size"},
)
