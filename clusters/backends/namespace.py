"""The AKS namespace backend: a namespace with a GPU ResourceQuota, a LimitRange, a
RoleBinding of ``edit`` for the team's Entra ID group, a NetworkPolicy, and a JupyterLab of its
owner's that the portal's app proxy opens (cloud.kube_lab: a Deployment and its Service).

It counts its GPU quota (whole GPUs) against the team's quota and costs quota / GPUs per node
of the node price while running. Kubernetes is its agent: the idle evidence is the GPU use the
DCGM exporter reports through Prometheus when PROMETHEUS_URL is set, else how many pods
requesting GPUs run in it (idle_evidence). Errors raised: CloudError.
"""

from __future__ import annotations

import logging
from datetime import datetime
from uuid import UUID

from django.contrib.auth.models import User

from cloud import kube
from cloud.errors import CloudError
from cloud.prometheus import NamespaceGpuUse
from clusters.backends.aks import (
    AksBackend,
    aks_fields,
    kube_api,
    nfs_volumes,
    object_labels,
    pool_of,
)
from clusters.backends.jupyter import (
    DEFAULT_IMAGE,
    JUPYTER_PORT,
    image_fields,
    jupyter_token,
    vscode_target,
)
from clusters.dcgm import dcgm_use_of, dcgm_use_read
from clusters.models import ClusterTeam, NodePool, PoolStatus
from common.words import counted, times
from environments.recipes import vscode_password_hash
from teams.models import Team
from workspaces import telemetry
from workspaces.backends import IdeTarget, KindForm, PoolUse, Step, Words, WorkspaceBackend
from workspaces.hooks import ALL_MOUNTS, MountChoice
from workspaces.models import Workspace
from workspaces.requests import Ask, WorkspaceActionError, check_member, workspace_insert
from workspaces.states import HOLDS_GPUS, Status
from workspaces.telemetry import ParsedSample

log = logging.getLogger(__name__)
# A namespace's RoleBinding names the team's group: without one nobody could use it.
NO_GROUP = (
    "{team} has no Entra ID group linked, and a namespace gives its group the edit role: "
    "a team admin links one on the team's page first."
)


class NamespaceBackend(AksBackend):
    """Kind "namespace" (see workspaces.backends.base.WorkspaceBackend)."""

    kind = "namespace"
    label = "AKS namespace"
    spend_colour = "#d69e2e"
    # Its GPU quota holds that many GPUs of its pool while the quota is in force.
    pool_use: PoolUse | None = PoolUse(holding=HOLDS_GPUS, units_field="gpu_count")
    delete_warning = "The namespace and everything in it"
    hand_over_note = "Its namespace stays open to the team's Entra ID group, as before."
    facts_template = "workspaces/kinds/namespace_facts.html"
    connect_template = "workspaces/kinds/namespace_connect.html"
    price_note = (
        "An AKS namespace costs its GPU quota × the node's hourly price ÷ GPUs per node while "
        "running."
    )
    words = Words(
        idle_when="GPU under {threshold}% in its pods",
        idle_unmeasured="no running pod requesting GPUs",
        readings_from="Read from the cluster",
        no_reading="No reading from the cluster yet: the portal looks at the namespace's pods "
        "on each scan.",
        sessions="",
        cpu=False,
        waiting_for="Waiting for the cluster",
        nothing_made="The portal checks again by itself; no namespace has been created yet.",
    )
    finished = {
        "create": "Namespace ready with a quota of {gpus}",
        "start": "GPU quota of {gpus} restored; workloads scaled back up",
        "deallocate": "GPU quota set to 0; workloads scaled to 0",
        "delete": "Namespace deleted",
    }

    def __init__(self, form: KindForm) -> None:
        self.form = form

    def what(self, workspace: Workspace) -> str:
        quota = counted(workspace.gpu_count, "GPU")
        return f"the namespace, its GPU quota of {quota} and the team's access"

    def on_created(self, workspace: Workspace, now: datetime) -> None:
        # Its agent row holds the idle evidence idle_evidence stores.
        telemetry.agent_token_issue(workspace_id=workspace.pk, now=now)

    def send(
        self, api: kube.KubeApi, workspace: Workspace, operation: str, now: datetime | None
    ) -> None:
        ns = workspace.namespace
        if operation == "create":
            kube.namespace_ensure(api, namespace_spec(workspace))
        elif operation == "start":
            kube.namespace_start(api, namespace_spec(workspace))
        elif operation == "deallocate":
            kube.namespace_stop(api, name=ns)
        else:
            kube.namespace_delete(api, name=ns, workspace_id=str(workspace.pk))

    def look(self, api: kube.KubeApi, workspace: Workspace, operation: str) -> Step:
        if operation == "delete":
            return Step(
                kube.namespace_delete(api, name=workspace.namespace, workspace_id=str(workspace.pk))
            )
        return Step(kube.namespace_phase(api, name=workspace.namespace) == "Active")

    def api_details(self, workspace: Workspace) -> dict[str, str | int | bool | None]:
        """Its GPU quota (whole GPUs, requests.nvidia.com/gpu) and its JupyterLab's image."""
        return {"gpu_quota": workspace.gpu_count, "image": workspace.image or DEFAULT_IMAGE}

    def ide_target(self, workspace: Workspace) -> IdeTarget | None:
        """Its JupyterLab (cloud.kube_lab) behind Service ``portal-jupyterlab``, by its cluster
        DNS name: the portal runs in the cluster (docs/operations.md, "The app proxy")."""
        if workspace.status != Status.RUNNING or not workspace.namespace:
            return None
        host = kube.lab_host(workspace.namespace)
        vscode = vscode_target(workspace, host)
        return IdeTarget(host, JUPYTER_PORT, jupyter_token(workspace), vscode=vscode)

    def size_label(self, workspace: Workspace) -> str:
        """Its GPU quota: "1 × A100 GPU", "2 × A100 GPUs"."""
        return times(workspace.gpu_count, workspace.gpu_model)

    def share(self, workspace: Workspace) -> tuple[int, int]:
        """GPU quota / GPUs per node."""
        return workspace.gpu_count, pool_of(workspace).gpus_per_node

    def idle_evidence(self, now: datetime) -> list[tuple[UUID, list[ParsedSample]]]:
        """One sample per running namespace. With PROMETHEUS_URL (clusters.dcgm): the GPU
        utilisation and memory DCGM sees in it, so a pod that holds GPUs without using them
        is idle. Otherwise, or for a namespace DCGM does not see: 100 % while a pod in it that
        requests GPUs runs, else 0 % (one Kubernetes list per namespace). A cluster that does
        not answer is logged and skipped: its namespaces get no sample, as a silent agent."""
        running = Workspace.objects.filter(kind=self.kind, status=Status.RUNNING).select_related(
            "node_pool__cluster"
        )
        use = dcgm_use_read(now=now)
        batch = []
        for workspace in running:
            cluster = pool_of(workspace).cluster.name
            seen = dcgm_use_of(use, cluster=cluster, namespace=workspace.namespace) if use else None
            if seen is not None:
                batch.append((workspace.pk, [_dcgm_sample(seen, now)]))
                continue
            try:
                api = kube_api(pool_of(workspace))
                pods = kube.namespace_gpu_pods(api, name=workspace.namespace)
            except CloudError as exc:
                log.warning("GPU pods of %s: %s: %s", workspace.namespace, exc.code, exc.message)
                continue
            batch.append((workspace.pk, [_sample(pods, now)]))
        return batch


def _dcgm_sample(seen: NamespaceGpuUse, now: datetime) -> ParsedSample:
    return ParsedSample(
        at=now,
        nvml=f"DCGM: {seen.devices} GPU device{'s' if seen.devices != 1 else ''} in use by pods",
        gpus=[],
        gpu_util=seen.gpu_util,
        gpu_mem_used_mib=seen.fb_used_mib,
        interactive=0,
        cpu_percent=None,
    )


def _sample(pods: int, now: datetime) -> ParsedSample:
    return ParsedSample(
        at=now,
        nvml=f"{pods} running pod{'s' if pods != 1 else ''} requesting GPUs",
        gpus=[],
        gpu_util=100 if pods else 0,
        gpu_mem_used_mib=0,
        interactive=0,
        cpu_percent=None,
    )


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
        labels=object_labels(workspace),
        nfs=nfs_volumes(workspace),
        lab=kube.LabSpec(
            image=workspace.image or DEFAULT_IMAGE,
            token=jupyter_token(workspace),
            vscode_password_hash=vscode_password_hash(workspace.pk),
        ),
    )


# --- requests ---------------------------------------------------------------------------


def workspace_request_namespace(
    *,
    user: User,
    team: Team,
    name: str,
    pool: NodePool,
    gpus: int,
    request_key: UUID,
    now: datetime,
    justification: str = "",
    mounts: MountChoice = ALL_MOUNTS,
) -> Workspace:
    """Ask for a namespace on ``pool``'s cluster with a quota of ``gpus`` whole GPUs of the
    pool's model; it costs gpus x the per-GPU share of the node price (USD/hour) while active.
    Its JupyterLab (no GPU; 1 CPU and 4 GiB of the namespace's quota) runs the team's default
    container environment's image, else DEFAULT_IMAGE (clusters.backends.jupyter).
    The namespace is named ``<team slug>-<name>`` as a DNS-1123 label. Raises
    WorkspaceActionError (team without the cluster or without a linked Entra ID group, a MIG
    pool, GPUs below 1, the namespace taken), JustificationNeeded and MountRefused (``mounts``,
    the team shares and home its claims give, as workspace_insert takes it)."""
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
        kind=NamespaceBackend.kind, namespace=namespace, node_pool__cluster_id=pool.cluster_id
    ).exclude(status__in=(Status.DELETED, Status.FAILED))
    if taken.exists():
        raise WorkspaceActionError(f"The namespace {namespace} exists already; choose a name.")
    price = (pool.price_per_gpu_hour * gpus).quantize(pool.price_per_hour)
    fields = aks_fields(pool, name, price, NamespaceBackend.kind)
    fields.update(gpu_count=gpus, namespace=namespace)
    # Its JupyterLab runs the team's default container environment, recorded as a slice's is.
    fields.update(image_fields(team, NamespaceBackend.kind))
    reason = f"Requested namespace {namespace} with {times(gpus, pool.gpu_model)}"
    ask = Ask(user, team, request_key, fields, gpus, reason, mounts=mounts)
    return workspace_insert(ask=ask, justification=justification, now=now)


def namespace_name(*, team: Team, name: str) -> str:
    """``<team slug>-<name>`` normalised to a DNS-1123 label (63 characters at most).
    Raises WorkspaceActionError when nothing usable is left."""
    try:
        return kube.dns_label(f"{team.slug}-{name}")
    except ValueError as exc:
        raise WorkspaceActionError(str(exc)) from exc


# mypy checks the class against the protocol, signatures included (a runtime_checkable
# isinstance compares only names).
_PROTOCOL_CHECKED: type[WorkspaceBackend] = NamespaceBackend
