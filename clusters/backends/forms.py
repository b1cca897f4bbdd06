"""The request pages of the AKS kinds: which form, with which choices from the team's
clusters, and which service the cleaned form goes to (see workspaces.backends.KindForm)."""

from clusters import selectors as cluster_selectors
from clusters.backends.mig import workspace_request_mig
from clusters.backends.namespace import workspace_request_namespace
from workspaces.backends import KindForm
from workspaces.forms import MigRequestForm, NamespaceRequestForm


def _mig_choices(team) -> dict:
    return {"choices": cluster_selectors.mig_choices(team=team) if team else []}


def _mig_request(*, data: dict, **common):
    gpu_model, profile = data["profile"].split("|", 1)
    return workspace_request_mig(
        profile=profile, gpu_model=gpu_model, image=data["image"], **common
    )


def _namespace_choices(team) -> dict:
    return {"pools": cluster_selectors.namespace_pools(team=team) if team else []}


def _namespace_request(*, data: dict, **common):
    return workspace_request_namespace(pool=data["pool"], gpus=data["gpus"], **common)


MIG = KindForm(
    path="mig",
    name="request-mig",
    template="workspaces/request_mig.html",
    form_class=MigRequestForm,
    choices=_mig_choices,
    request=_mig_request,
)
NAMESPACE = KindForm(
    path="namespace",
    name="request-namespace",
    template="workspaces/request_namespace.html",
    form_class=NamespaceRequestForm,
    choices=_namespace_choices,
    request=_namespace_request,
)
