"""Business rules for the workspaces that run on AKS: MIG slices and namespaces.

A MIG slice is one pod (a StatefulSet of 1) in the team's namespace requesting one
``nvidia.com/mig-<profile>``, pinned to its node pool, with a PVC for /home and a Service. Its
owner alone may port-forward to it, as the Entra ID identity of their teams.models.Profile; the
team's group has no rights in that namespace, which holds every member's tokens.
A namespace workspace is a namespace with a GPU ResourceQuota, a LimitRange, a RoleBinding of
``edit`` for the team's Entra ID group and a NetworkPolicy. Both go through the same state
machine as VMs; Kubernetes calls are idempotent (``cloud.kube``), so a worker that dies
midway is simply run again. Errors raised: WorkspaceActionError (message shown as is).
"""

import hmac
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from django.conf import settings
from django.core.cache import cache

from agent import cloud_init
from cloud import aks, kube
from cloud.errors import CloudError
from clusters import selectors as cluster_selectors
from clusters.models import ClusterTeam, NodePool, PoolStatus
from clusters.services import cluster_ref
from common.words import with_article
from teams.models import Profile, Team
from workspaces import states, telemetry
from workspaces.gpus import SLICES_PER_GPU
from workspaces.live_topics import workspaces_changed
from workspaces.models import Kind, Workspace
from workspaces.services import (
    Ask,
    Next,
    WorkspaceActionError,
    azure_settings,
    check_member,
    workspace_insert,
)
from workspaces.states import Status

DEFAULT_IMAGE = "quay.io/jupyter/pytorch-notebook:cuda12-latest"
JUPYTER_PORT = 8888
KUBE_ENDPOINT_CACHE_SECONDS = 3600
# A MIG slice's Kubernetes objects (its owner's Role and RoleBinding among them) may exist.
# A namespace's RoleBinding names the team's group: without one nobody could use it.
NO_GROUP = (
    "{team} has no Entra ID group linked, and a namespace gives its group the edit role: "
    "a team admin links one on the team's page first."
)
ACCESS_STATUSES = frozenset(
    {Status.PROVISIONING, Status.RUNNING, Status.STOPPING, Status.STOPPED, Status.STARTING}
)


# --- requests -------------------------------------------------------------------------------


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
    WorkspaceActionError (team without the cluster or without a linked Entra ID group, a MIG
    pool, GPUs below 1, the namespace taken) and JustificationNeeded."""
    check_member(user=user, team=team)
    link = ClusterTeam.objects.filter(cluster_id=pool.cluster_id, team=team).first()
    if link is None or pool.status != PoolStatus.READY or pool.gpu_instance_profile:
        raise WorkspaceActionError(f"{team.name} cannot take GPUs of node pool {pool.name}.")
    if team.entra_group_id is None:
        raise WorkspaceActionError(NO_GROUP.format(team=team.name))
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


def billing_share(workspace: Workspace) -> tuple[int, int]:
    """The fraction of one node's price the workspace costs while billable, as (num, den):
    a MIG slice slices / (7 x GPUs per node); a namespace its GPU quota / GPUs per node."""
    gpus = workspace.node_pool.gpus_per_node
    if workspace.kind == Kind.MIG:
        return workspace.gpu_slices, SLICES_PER_GPU * gpus
    return workspace.gpu_count, gpus


# --- the worker side ------------------------------------------------------------------------


def kube_api(pool: NodePool):
    """The Kubernetes API client of the pool's cluster. The API server's address comes from
    the cluster's user kubeconfig (one ARM call, kept KUBE_ENDPOINT_CACHE_SECONDS).
    Raises CloudError."""
    key = f"kube-endpoint:{pool.cluster_id}"
    endpoint = cache.get(key)
    if endpoint is None:
        endpoint = aks.kube_endpoint(azure_settings(), cluster_ref(pool.cluster))
        cache.set(key, endpoint, KUBE_ENDPOINT_CACHE_SECONDS)
    return kube.kube_api(azure_settings(), endpoint.server, endpoint.ca_data)


@dataclass(frozen=True)
class Step:
    """The outcome of one look at Kubernetes: ``done`` (move on to the operation's status),
    else ``waiting`` (why it is not done yet, shown to the user; "" while simply in flight)."""

    done: bool
    waiting: str = ""


def advance(workspace: Workspace, clock: Callable[[], datetime]) -> Next:
    """One step of the Kubernetes work the workspace's status owes (see workspaces.services.
    workspace_advance, which calls this for MIG and namespace workspaces). Raises CloudError."""
    if workspace.status == Status.REQUESTED:
        where = f"namespace {workspace.namespace} on node pool {workspace.node_pool.name}"
        moved = states.transition(
            workspace_id=workspace.pk,
            expected=Status.REQUESTED,
            to=Status.PROVISIONING,
            now=clock(),
            reason=f"Creating {_what(workspace)} in {where}",
            waiting_reason="",
        )
        if not moved:
            return Next.DONE
        workspace.refresh_from_db()
    if workspace.status not in states.OPERATION:
        return Next.DONE
    api = kube_api(workspace.node_pool)
    step = _act(api, workspace, clock())
    if not step.done:
        if step.waiting != workspace.waiting_reason:
            workspaces_changed([workspace.pk])
        Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
            waiting_reason=step.waiting, updated_at=clock()
        )
        return Next.PENDING if step.waiting else Next.POLL
    _finish(workspace, clock())
    return Next.DONE


def _what(workspace: Workspace) -> str:
    if workspace.kind == Kind.MIG:
        return f"the {workspace.mig_profile} pod {kube_name(workspace)}"
    return f"the namespace, its GPU quota of {workspace.gpu_count} and the team's access"


def kube_name(workspace: Workspace) -> str:
    """Name of a MIG workspace's StatefulSet, Service and PVC prefix: "ws-<12 hex>"."""
    return f"ws-{workspace.short_id}"


def _act(api, workspace: Workspace, now: datetime) -> Step:
    """Send what the status owes once (remembered in ``operation``), then look."""
    operation = states.OPERATION[workspace.status][0]
    if workspace.operation != operation:
        _send(api, workspace, operation, now)
        Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
            operation=operation
        )
    if workspace.kind == Kind.MIG:
        return _look_mig(api, workspace, operation)
    return _look_namespace(api, workspace, operation)


def _send(api, workspace: Workspace, operation: str, now: datetime) -> None:
    ns, name = workspace.namespace, kube_name(workspace)
    if workspace.kind == Kind.MIG:
        if operation == "create":
            kube.mig_ensure(api, _mig_spec(workspace, now))
        elif operation == "delete":
            kube.mig_delete(api, namespace=ns, name=name)
        else:
            if operation == "start":  # Slices made before issue 14 get their owner's Role.
                kube.mig_access(api, slice_access(workspace))
            kube.mig_scale(api, namespace=ns, name=name, replicas=int(operation == "start"))
        return
    if operation == "create":
        kube.namespace_ensure(api, namespace_spec(workspace))
    elif operation == "start":
        kube.namespace_start(api, namespace_spec(workspace))
    elif operation == "deallocate":
        kube.namespace_stop(api, name=ns)
    else:
        kube.namespace_delete(api, name=ns, workspace_id=str(workspace.pk))


def _look_mig(api, workspace: Workspace, operation: str) -> Step:
    ns, name = workspace.namespace, kube_name(workspace)
    if operation == "delete":
        return Step(kube.mig_delete(api, namespace=ns, name=name))
    state = kube.mig_state(api, namespace=ns, name=name)
    if operation == "deallocate":
        return Step(state.phase == "Absent")
    if state.phase == "Running" and state.ready:
        return Step(True)
    if state.phase == "Pending" and state.reason == "Unschedulable":
        return Step(False, slice_waiting(api, workspace))
    if state.reason == "FailedCreate":
        return Step(False, f"Kubernetes refused the pod: {state.message}")
    return Step(False)


def _look_namespace(api, workspace: Workspace, operation: str) -> Step:
    if operation == "delete":
        return Step(
            kube.namespace_delete(api, name=workspace.namespace, workspace_id=str(workspace.pk))
        )
    return Step(kube.namespace_phase(api, name=workspace.namespace) == "Active")


def slice_waiting(api, workspace: Workspace) -> str:
    """Why a MIG pod is Pending, from the cluster's own count, and which profiles the team
    could take now instead: "Waiting for a free 1g.10gb slice (0 of 7 free on pool mig1g).
    Free now: 3g.40gb (2)." Raises CloudError."""
    pool = workspace.node_pool
    resource = f"nvidia.com/mig-{workspace.mig_profile}"
    lines = [c for c in kube.pool_capacity(api) if c.pool == pool.name and c.resource == resource]
    total = sum(c.total for c in lines)
    free = max(0, total - sum(c.used for c in lines))
    text = (
        f"Waiting for a free {workspace.mig_profile} slice ({free} of {total} free on pool "
        f"{pool.name}); it starts by itself when one frees up."
    )
    others = [
        f"{c.profile} ({c.free})"
        for c in cluster_selectors.mig_choices(team=workspace.team)
        if c.free and c.profile != workspace.mig_profile
    ]
    if others:
        text += f" Free now: {', '.join(others)}; delete this one and ask for another."
    return text


def _mig_spec(workspace: Workspace, now: datetime) -> kube.MigSpec:
    pool = workspace.node_pool
    return kube.MigSpec(
        workspace_id=str(workspace.pk),
        namespace=workspace.namespace,
        name=kube_name(workspace),
        image=workspace.image or DEFAULT_IMAGE,
        mig_profile=workspace.mig_profile,
        pool_name=pool.name,
        tolerations=tuple(pool.taints),
        env=(
            ("GPU_PORTAL_URL", settings.PORTAL_URL),
            ("GPU_PORTAL_WORKSPACE", str(workspace.pk)),
            # "%g": a demo's 0.5 s must not become "0", which the agent refuses.
            ("GPU_PORTAL_INTERVAL_SECONDS", f"{settings.AGENT_INTERVAL_SECONDS:g}"),
        ),
        agent_token=telemetry.agent_token_issue(workspace_id=workspace.pk, now=now),
        labels=_object_labels(workspace),
        # The agent runs in the pod on its MIG device, as cloud-init runs it on a VM.
        agent_script=cloud_init.agent_source(),
        agent_requirement=cloud_init.nvml_requirement(),
        owner_users=owner_users(workspace.owner),
        jupyter_token=jupyter_token(workspace),
    )


def owner_users(user) -> tuple[str, ...]:
    """The Kubernetes user names of the user's Entra ID identity (teams.models.Profile), () when
    they gave none: their slices' pods then let nobody port-forward."""
    profile = Profile.objects.filter(user=user).first()
    return profile.kubernetes_users if profile else ()


def slice_access(workspace: Workspace) -> kube.SliceAccess:
    """Who may reach the MIG workspace's pod: its owner, by their Entra ID identity."""
    return kube.SliceAccess(
        workspace_id=str(workspace.pk),
        namespace=workspace.namespace,
        name=kube_name(workspace),
        users=owner_users(workspace.owner),
        labels=_object_labels(workspace),
    )


def slice_access_queue(*, owner) -> int:
    """Queue slice_access_refresh for each MIG workspace of `owner` whose objects may exist
    (after they changed their Entra ID identity). Returns how many."""
    from workspaces.tasks import refresh_slice_access

    ids = list(
        Workspace.objects.filter(
            owner=owner, kind=Kind.MIG, status__in=ACCESS_STATUSES
        ).values_list("pk", flat=True)
    )
    for workspace_id in ids:
        refresh_slice_access.delay(str(workspace_id))
    return len(ids)


def slice_access_refresh(*, workspace_id) -> None:
    """The worker's side: the slice's owner Role and RoleBinding made to name its owner's
    identity now (nothing for a slice gone or not yet made). Raises CloudError."""
    workspace = Workspace.objects.select_related("node_pool", "owner", "team").get(pk=workspace_id)
    if workspace.kind == Kind.MIG and workspace.status in ACCESS_STATUSES:
        kube.mig_access(kube_api(workspace.node_pool), slice_access(workspace))


def slice_access_refresh_all() -> dict[str, str]:
    """slice_access_refresh for every MIG workspace whose objects may exist, in place (an
    operator's command after upgrading: the team's old edit binding goes from every slices'
    namespace). Returns {workspace id: "ok" or the CloudError's words}."""
    done = {}
    for workspace_id in Workspace.objects.filter(
        kind=Kind.MIG, status__in=ACCESS_STATUSES
    ).values_list("pk", flat=True):
        try:
            slice_access_refresh(workspace_id=workspace_id)
            done[str(workspace_id)] = "ok"
        except CloudError as exc:
            done[str(workspace_id)] = f"{exc.code}: {exc.message}"
    return done


def jupyter_token(workspace: Workspace) -> str:
    """JupyterLab's login token of a MIG workspace, derived from SECRET_KEY (never stored):
    shown to those who may act on the workspace, and handed to the pod through its Secret."""
    mac = hmac.new(settings.SECRET_KEY.encode(), f"jupyter:{workspace.pk}".encode(), "sha256")
    return mac.hexdigest()[:48]


def namespace_spec(workspace: Workspace) -> kube.NamespaceSpec:
    """What the namespace workspace holds in Kubernetes; its RoleBinding names the team's Entra
    ID group (Team.entra_group_id). Raises CloudError (not transient) when the team's group
    was unlinked after the request, rather than bind edit to nobody."""
    group = workspace.team.entra_group_id
    if group is None:
        raise CloudError("TeamGroupNotLinked", NO_GROUP.format(team=workspace.team.name))
    return kube.NamespaceSpec(
        workspace_id=str(workspace.pk),
        name=workspace.namespace,
        group_object_id=str(group),
        gpus=workspace.gpu_count,
        labels=_object_labels(workspace),
    )


def _object_labels(workspace: Workspace) -> tuple[tuple[str, str], ...]:
    return (("team", workspace.team.slug), ("owner", _label(workspace.owner.username)))


def _label(text: str) -> str:
    try:
        return kube.dns_label(text)
    except ValueError:
        return "unknown"


FINISHED = {
    (Kind.MIG, "create"): "Pod running on a {profile} MIG slice",
    (Kind.MIG, "start"): "Pod running on a {profile} MIG slice",
    (Kind.MIG, "deallocate"): "Scaled to 0; /home kept",
    (Kind.MIG, "delete"): "Pod, Service and /home volume deleted",
    (Kind.NAMESPACE, "create"): "Namespace ready with a quota of {gpus} GPUs",
    (Kind.NAMESPACE, "start"): "GPU quota of {gpus} restored; workloads scaled back up",
    (Kind.NAMESPACE, "deallocate"): "GPU quota set to 0; workloads scaled to 0",
    (Kind.NAMESPACE, "delete"): "Namespace deleted",
}


def _finish(workspace: Workspace, now: datetime) -> None:
    operation, done = states.OPERATION[workspace.status]
    if workspace.kind == Kind.NAMESPACE and operation == "create":
        # Its agent row holds the idle evidence workspaces.kube_activity stores.
        telemetry.agent_token_issue(workspace_id=workspace.pk, now=now)
    reason = FINISHED[(workspace.kind, operation)].format(
        profile=workspace.mig_profile, gpus=workspace.gpu_count
    )
    states.transition(
        workspace_id=workspace.pk,
        expected=workspace.status,
        to=done,
        now=now,
        reason=reason,
        operation="",
        operation_token="",
        waiting_reason="",
        error_code="",
        error_message="",
    )


def clean_up_failed_create(workspace: Workspace) -> None:
    """Remove what a refused create left in Kubernetes (nothing half-made stays).
    Raises CloudError."""
    api = kube_api(workspace.node_pool)
    if workspace.kind == Kind.MIG:
        kube.mig_delete(api, namespace=workspace.namespace, name=kube_name(workspace))
    else:
        kube.namespace_delete(api, name=workspace.namespace, workspace_id=str(workspace.pk))


def kubeconfig(*, workspace: Workspace) -> bytes:
    """The cluster's user kubeconfig (Entra ID login through kubelogin; it holds no secret)
    for a MIG or namespace workspace. Raises CloudError."""
    return aks.user_kubeconfig(azure_settings(), cluster_ref(workspace.node_pool.cluster))
