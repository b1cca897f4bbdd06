"""Platform admin forms: register a cluster, give a team access, ask for a node pool."""

from typing import TYPE_CHECKING, Any, cast

from django import forms
from django.db.models import QuerySet

from clusters import mig
from clusters.services import PoolRequest
from common.validation import TextField
from teams.models import Team


class ClusterRegisterForm(forms.Form):
    subscription_id = forms.UUIDField(label="Subscription ID")
    resource_group = forms.RegexField(
        regex=r"^[-\w._()]{1,90}$",
        max_length=90,
        error_messages={"invalid": "A resource group name is 1-90 letters, digits, - _ . ( )."},
    )
    name = forms.RegexField(
        label="Cluster name",
        regex=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,61}[A-Za-z0-9]?$",
        max_length=63,
        error_messages={"invalid": "An AKS cluster name is 1-63 letters, digits, - and _."},
    )


# ModelChoiceField is generic for mypy (django-stubs) only: subscripted at run time it raises.
if TYPE_CHECKING:
    _TeamModelChoiceField = forms.ModelChoiceField[Team]
else:
    _TeamModelChoiceField = forms.ModelChoiceField


class TeamChoiceField(_TeamModelChoiceField):
    """A team with the Entra ID group its namespace RoleBindings will name (the team's own)."""

    def label_from_instance(self, team: Team) -> str:
        group = team.entra_group_name or team.entra_group_id
        return f"{team.name} (group {group})" if group else f"{team.name} (no group linked)"


class ClusterTeamForm(forms.Form):
    team = TeamChoiceField(
        queryset=None,
        help_text="Its linked Entra ID group gets the edit role in its namespace workspaces; "
        "a team admin links the group on the team's page.",
    )
    namespace = TextField(
        required=False,
        max_length=63,
        help_text="For the team's MIG slice pods (each owner alone reaches theirs); "
        "default team-<slug>.",
    )

    def __init__(self, *args: Any, teams: QuerySet[Team], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(TeamChoiceField, self.fields["team"]).queryset = teams


class NodePoolForm(forms.Form):
    name = TextField(max_length=12, help_text="1-12 lower-case letters and digits.")
    vm_size = forms.ChoiceField(label="VM size")
    gpu_instance_profile = forms.ChoiceField(
        label="GPU instance profile",
        required=False,
        choices=[("", "None (whole GPUs, for namespaces)")]
        + [(p, p) for p in mig.INSTANCE_PROFILES],
        help_text="MIG1g..MIG7g split each A100/H100 into MIG instances of one profile.",
    )
    node_count = forms.IntegerField(min_value=0, max_value=100, initial=1)
    autoscale = forms.BooleanField(required=False, label="Autoscale between")
    min_count = forms.IntegerField(min_value=0, max_value=100, required=False)
    max_count = forms.IntegerField(min_value=1, max_value=100, required=False)
    taints = TextField(
        required=False,
        max_length=1000,
        help_text="Comma-separated, e.g. sku=gpu:NoSchedule",
    )
    labels = TextField(
        required=False, max_length=1000, help_text="Comma-separated key=value pairs."
    )
    capacity_reservation_group = forms.RegexField(
        required=False,
        regex=r"^[A-Za-z0-9][-\w.]{0,79}$",
        max_length=80,
        label="Capacity reservation group",
        help_text="A booking's group (booking-…, on the bookings page of every team): the "
        "pool's nodes are its reserved VMs, of the same size and region. Fixed at creation.",
        error_messages={"invalid": "A group name is 1-80 letters, digits, - _ and ."},
    )

    def __init__(self, *args: Any, sizes: list[tuple[str, str]], **kwargs: Any) -> None:
        """``sizes``: (vm_size, label) of the GPU sizes priced in the cluster's region."""
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["vm_size"]).choices = sizes

    def clean_labels(self) -> tuple[tuple[str, str], ...]:
        pairs = []
        for item in _items(self.cleaned_data["labels"]):
            key, sep, value = item.partition("=")
            if not sep:
                raise forms.ValidationError(f"Labels are key=value; not {item!r}.")
            pairs.append((key.strip(), value.strip()))
        return tuple(pairs)

    def request(self) -> PoolRequest:
        data = self.cleaned_data
        autoscale = data["autoscale"]
        return PoolRequest(
            name=data["name"].strip(),
            vm_size=data["vm_size"],
            gpu_instance_profile=data["gpu_instance_profile"],
            node_count=data["node_count"],
            min_count=data["min_count"] if autoscale else None,
            max_count=data["max_count"] if autoscale else None,
            taints=tuple(_items(data["taints"])),
            labels=data["labels"],
            capacity_reservation_group=data["capacity_reservation_group"],
        )


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
