"""How the AKS kinds are requested, on their pages and through the API: their forms, with
which choices from the team's clusters, and which service the cleaned form goes to (see
workspaces.backends.KindForm)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django import forms
from django.contrib.auth.models import User
from django.db.models import QuerySet
from django.urls import reverse

from clusters import selectors as cluster_selectors
from clusters.backends.mig import MigBackend, workspace_request_mig
from clusters.backends.namespace import workspace_request_namespace
from clusters.models import NodePool
from clusters.selectors import MigChoice, PoolRow
from common.validation import TextField
from environments.models import Environment
from environments.selectors import environment_choices
from environments.validation import container_image_clean
from teams.models import Team
from workspaces.backends import ApiField, KindForm
from workspaces.forms import MountsFormMixin, clean_workspace_name
from workspaces.models import Workspace


class _AksRequestForm(MountsFormMixin):
    """Fields shared by the MIG slice and namespace request forms (what to mount too:
    MountsFormMixin); ``team`` re-renders the choices of the chosen team (htmx)."""

    team: forms.ModelChoiceField[Team] = forms.ModelChoiceField(queryset=None, empty_label=None)
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

    def __init__(self, *args: Any, teams: QuerySet[Team], url_name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        team = cast("forms.ModelChoiceField[Team]", self.fields["team"])
        team.queryset = teams
        team.widget.attrs.update(
            {
                "hx-get": reverse(url_name),
                "hx-target": "#choices",
                "hx-select": "#choices",
                "hx-select-oob": "#mounts-choice",  # the chosen team's shares to mount
                "hx-swap": "outerHTML",
                "hx-trigger": "change",
            }
        )

    def clean_name(self) -> str:
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
    environment = forms.ChoiceField(
        required=False,
        help_text="A container image from the catalog, pinned by version or digest.",
        error_messages={"invalid_choice": "That is not an environment your team can choose."},
    )
    image = TextField(
        max_length=200,
        required=False,
        help_text="Or your own container image, pinned: registry/name:version or @sha256:…",
    )
    queue_when_full = forms.BooleanField(
        required=False,
        label="Wait in the queue when there is no room",
        help_text=(
            "When your team's GPUs are in use or the pool has no free slice of the profile, "
            "wait in the fair queue and start by itself when your turn comes."
        ),
    )
    field_order = [
        "team",
        "name",
        "profile",
        "environment",
        "image",
        "queue_when_full",
        "justification",
    ]

    def __init__(
        self,
        *args: Any,
        choices: list[MigChoice],
        environments: list[Environment] | None = None,
        **kwargs: Any,
    ) -> None:
        """``choices``: clusters.selectors.MigChoice of the chosen team; ``environments``:
        the container environments it may choose, best first (the first is the default)."""
        super().__init__(*args, url_name="workspaces:request-mig", **kwargs)
        self.choices = choices
        self.environments = environments or []
        cast(forms.ChoiceField, self.fields["profile"]).choices = [
            (f"{c.gpu_model}|{c.profile}", f"{c.gpu_model} {c.profile}") for c in choices
        ]
        cast(forms.ChoiceField, self.fields["environment"]).choices = [("", "Default")] + [
            (e.slug, f"{e.name} ({e.container_image})") for e in self.environments
        ]

    def clean_environment(self) -> Environment | None:
        slug = self.cleaned_data["environment"]
        return next((e for e in self.environments if e.slug == slug), None)

    def clean_image(self) -> str:
        image: str = self.cleaned_data["image"].strip()
        if not image:
            return ""
        try:
            # Pinned, as a catalog entry is, so the workspace can be made the same again.
            return container_image_clean(image)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc


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

    def __init__(self, *args: Any, pools: list[PoolRow], **kwargs: Any) -> None:
        """``pools``: clusters.selectors.PoolRow of the chosen team's namespace pools."""
        super().__init__(*args, url_name="workspaces:request-namespace", **kwargs)
        self.pools = pools
        cast(forms.ChoiceField, self.fields["pool"]).choices = [
            (str(r.pool.pk), r.pool.name) for r in pools
        ]

    def clean_pool(self) -> NodePool:
        chosen = self.cleaned_data["pool"]
        return next(r.pool for r in self.pools if str(r.pool.pk) == chosen)


MIG_KIND = MigBackend.kind


def _mig_choices(team: Team | None) -> dict[str, Any]:
    if team is None:
        return {"choices": [], "environments": []}
    return {
        "choices": cluster_selectors.mig_choices(team=team),
        "environments": environment_choices(team=team, kind=MIG_KIND),
    }


def _mig_request(*, data: Mapping[str, Any], **common: Any) -> Workspace:
    gpu_model, profile = data["profile"].split("|", 1)
    return workspace_request_mig(
        profile=profile,
        gpu_model=gpu_model,
        image=data["image"],
        environment=data.get("environment"),
        queue_when_full=data.get("queue_when_full", False),
        **common,
    )


def _mig_api_data(values: Mapping[str, Any], form: Any, user: User) -> dict[str, str]:
    """The form's ``profile`` ("A100|1g.10gb") from the API's mig_profile and gpu_model (the
    model may be left out when one model serves the profile)."""
    profile, model = values["mig_profile"], values["gpu_model"]
    found = [c for c in form.choices if c.profile == profile and model in ("", c.gpu_model)]
    model = model or (found[0].gpu_model if len(found) == 1 else "")
    return {
        "profile": f"{model}|{profile}",
        "image": values["image"],
        "environment": values["environment"],
        "queue_when_full": "on" if values.get("queue_when_full") else "",
    }


def _namespace_choices(team: Team | None) -> dict[str, Any]:
    return {"pools": cluster_selectors.namespace_pools(team=team) if team else []}


def _namespace_request(*, data: Mapping[str, Any], **common: Any) -> Workspace:
    return workspace_request_namespace(pool=data["pool"], gpus=data["gpus"], **common)


def _namespace_api_data(values: Mapping[str, Any], form: Any, user: User) -> dict[str, str]:
    """The form's ``pool`` (its id) from the API's gpu_model and pool name (which may be left
    out when one pool serves the model), and its ``gpus``."""
    model, name = values["gpu_model"], values["pool"]
    pools = [r.pool for r in form.pools if r.pool.gpu_model == model and name in ("", r.pool.name)]
    gpus = values["gpus"]
    return {"pool": str(pools[0].pk) if len(pools) == 1 else "", "gpus": str(gpus or "")}


MIG = KindForm(
    path="mig",
    name="request-mig",
    template="workspaces/request_mig.html",
    form_class=MigRequestForm,
    choices=_mig_choices,
    request=_mig_request,
    api_fields=(
        ApiField("mig_profile", str, max_length=16, required=True),
        ApiField("gpu_model", str, max_length=16),
        ApiField("image", str, max_length=200),
        ApiField("environment", str, max_length=64),
        ApiField("queue_when_full", bool),
    ),
    api_form_data=_mig_api_data,
    api_names={"profile": "mig_profile"},
)
NAMESPACE = KindForm(
    path="namespace",
    name="request-namespace",
    template="workspaces/request_namespace.html",
    form_class=NamespaceRequestForm,
    choices=_namespace_choices,
    request=_namespace_request,
    api_fields=(
        ApiField("gpus", int, ge=1, le=64, required=True),
        ApiField("gpu_model", str, max_length=16, required=True),
        ApiField("pool", str, max_length=12),
    ),
    api_form_data=_namespace_api_data,
    api_names={"pool": "gpu_model"},
)
