"""Business rules for asking for the workspaces that run on AKS: MIG slices and namespaces,
and the operator's refresh of MIG slices' owner access.

Both then go through the same state machine as VMs (workspaces.services.workspace_advance),
served by clusters.backends.mig and clusters.backends.namespace.
Errors raised: WorkspaceActionError (message shown as is), JustificationNeeded.
"""

from datetime import datetime
from fractions import Fraction

from cloud import kube
from cloud.errors import CloudError
from clusters import selectors as cluster_selectors
from clusters.backends.aks import kube_api
from clusters.backends.mig import ACCESS_STATUSES, DEFAULT_IMAGE, jupyter_token, kube_name
from clusters.models import ClusterTeam, NodePool, PoolStatus
from common.words import with_article
from teams.models import Team
from workspaces.backends import backend_for
from workspaces.gpus import SLICES_PER_GPU
from workspaces.models import Kind, Workspace
from workspaces.services import Ask, WorkspaceActionError, check_member, workspace_insert
from workspaces.states import Status

# Callers (the demo, tests) reach the MIG pods' names and tokens and the clusters' API here.
__all__ = [
    "jupyter_token",
    "kube_api",
    "kube_name",
    "namespace_name",
    "slice_access_refresh_all",
    "workspace_request_mig",
    "workspace_request_namespace",
]


def workspace_request_mig(
    *,
    user,
    team: Team,
    name: str,
    profile: str,
    gpu_model: str,
    request_key,
    now: datetime,
    image: str = "",
    justification: str = "",
) -> Workspace:
    """Ask for one MIG slice of ``profile`` ("1g.10gb") on a ``gpu_model`` GPU, placed on the
    team's ready pool serving it with the most free instances. It counts slices/7 of a GPU
    against the team's quota of that model, and costs that share of the node price (USD/hour).
    Raises WorkspaceActionError when no pool on the team's clusters serves the profile, and
    JustificationNeeded above quota without a reason."""
    check_member(user=user, team=team)
    choice = next(
        (
            c
            for c in cluster_selectors.mig_choices(team=team)
            if c.profile == profile and c.gpu_model == gpu_model
        ),
        None,
    )
    if choice is None:
        raise WorkspaceActionError(
            f"No node pool offers {gpu_model} {profile} slices to {team.name}; "
            "choose another profile or ask a platform admin."
        )
    link = ClusterTeam.objects.get(cluster_id=choice.pool.cluster_id, team=team)
    fields = _aks_fields(choice.pool, name, choice.price_per_hour, Kind.MIG)
    fields.update(
        mig_profile=profile,
        gpu_slices=choice.slices,
        namespace=link.namespace,
        image=image.strip() or DEFAULT_IMAGE,
    )
    slice_name = f"{with_article(gpu_model)} {profile} MIG slice"
    reason = f"Requested {slice_name} on node pool {choice.pool.name}"
    ask = Ask(user, team, request_key, fields, Fraction(choice.slices, SLICES_PER_GPU), reason)
    return workspace_insert(ask=ask, justification=justification, now=now)


def workspace_request_namespace(
    *,
    user,
    team: Team,
    name: str,
    pool: NodePool,
    gpus: int,
    request_key,
    now: datetime,
    justification: str = "",
) -> Workspace:
    """Ask for a namespace on ``pool``'s cluster with a quota of ``gpus`` whole GPUs of the
    pool's model; it costs gpus x the per-GPU share of the node price (USD/hour) while active.
    The namespace is named ``<team slug>-<name>`` as a DNS-1123 label. Raises
    WorkspaceActionError (team without the cluster, a MIG pool, GPUs below 1, the namespace
    taken) and JustificationNeeded."""
    check_member(user=user, team=team)
    link = ClusterTeam.objects.filter(cluster_id=pool.cluster_id, team=team).first()
    if link is None or pool.status != PoolStatus.READY or pool.gpu_instance_profile:
        raise WorkspaceActionError(f"{team.name} cannot take GPUs of node pool {pool.name}.")
    if gpus < 1:
        raise WorkspaceActionError("Ask for at least 1 GPU.")
    namespace = namespace_name(team=team, name=name)
    taken = Workspace.objects.filter(
        kind=Kind.NAMESPACE, namespace=namespace, node_pool__cluster_id=pool.cluster_id
    ).exclude(status__in=(Status.DELETED, Status.FAILED))
    if taken.exists():
        raise WorkspaceActionError(f"The namespace {namespace} exists already; choose a name.")
    price = (pool.price_per_gpu_hour * gpus).quantize(pool.price_per_hour)
    fields = _aks_fields(pool, name, price, Kind.NAMESPACE)
    fields.update(gpu_count=gpus, namespace=namespace)
    reason = f"Requested namespace {namespace} with {gpus} × {pool.gpu_model} GPUs"
    ask = Ask(user, team, request_key, fields, gpus, reason)
    return workspace_insert(ask=ask, justification=justification, now=now)


def namespace_name(*, team: Team, name: str) -> str:
    """``<team slug>-<name>`` normalised to a DNS-1123 label (63 characters at most).
    Raises WorkspaceActionError when nothing usable is left."""
    try:
        return kube.dns_label(f"{team.slug}-{name}")
    except ValueError as exc:
        raise WorkspaceActionError(str(exc)) from exc


def _aks_fields(pool: NodePool, name: str, price, kind: str) -> dict:
    return {
        "kind": kind,
        "name": name,
        "node_pool": pool,
        "vm_size": pool.vm_size,
        "region": pool.cluster.location,
        "price_per_hour": price,
        "gpu_model": pool.gpu_model,
    }


def slice_access_refresh_all() -> dict[str, str]:
    """Refresh the owner access of every MIG workspace whose objects may exist, in place (an
    operator's command after upgrading: the team's old edit binding goes from every slices'
    namespace). Returns {workspace id: "ok" or the CloudError's words}."""
    backend = backend_for(Kind.MIG)
    done = {}
    for workspace in Workspace.objects.filter(
        kind=Kind.MIG, status__in=ACCESS_STATUSES
    ).select_related("node_pool", "owner", "team"):
        try:
            backend.access_refresh(workspace)
            done[str(workspace.pk)] = "ok"
        except CloudError as exc:
            done[str(workspace.pk)] = f"{exc.code}: {exc.message}"
    return done
