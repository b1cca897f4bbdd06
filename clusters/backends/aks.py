"""What the AKS workspace backends share: the cluster's Kubernetes client, the send-once-then-
look state machine step, billing as a share of the node price, and the user kubeconfig.

Kubernetes calls are idempotent (cloud.kube), so a worker that dies midway is simply run again.
A subclass (clusters.backends.mig, clusters.backends.namespace) says what each operation sends
(``send``), how it looks for the result (``look``), and the words of its events.
Errors raised: CloudError.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from fractions import Fraction
from typing import Any
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache

from cloud import aks, kube
from cloud.errors import CloudError
from clusters.models import NodePool
from clusters.services import cluster_ref
from common.words import counted
from teams.models import Team
from workspaces import hooks, states
from workspaces.azure import azure_in_request, azure_settings
from workspaces.backends import (
    IdeTarget,
    Meters,
    ResizeChoice,
    RightsizeOptions,
    SizingOffer,
    Step,
)
from workspaces.chains import Next
from workspaces.live_topics import workspaces_changed
from workspaces.models import Workspace
from workspaces.states import BILLABLE_ON_AKS, Status
from workspaces.telemetry import ParsedSample

KUBE_ENDPOINT_CACHE_SECONDS = 3600


def kube_api(pool: NodePool) -> kube.KubeApi:
    """The Kubernetes API client of the pool's cluster. The API server's address comes from
    the cluster's user kubeconfig (one ARM call, kept KUBE_ENDPOINT_CACHE_SECONDS).
    Raises CloudError."""
    key = f"kube-endpoint:{pool.cluster_id}"
    endpoint = cache.get(key)
    if endpoint is None:
        endpoint = aks.kube_endpoint(azure_settings(), cluster_ref(pool.cluster))
        cache.set(key, endpoint, KUBE_ENDPOINT_CACHE_SECONDS)
    return kube.kube_api(azure_settings(), endpoint.server, endpoint.ca_data)


def pool_of(workspace: Workspace) -> NodePool:
    """The node pool an AKS workspace runs on: every AKS kind's request sets it. Raises
    CloudError (not transient) for a workspace without one."""
    pool = workspace.node_pool
    if pool is None:
        raise CloudError("NoNodePool", f"Workspace {workspace.pk} has no node pool.")
    return pool


def object_labels(workspace: Workspace) -> tuple[tuple[str, str], ...]:
    """Labels of the workspace's Kubernetes objects: its team's slug and owner's user name."""
    return (("team", workspace.team.slug), ("owner", _label(workspace.owner.username)))


def _label(text: str) -> str:
    try:
        return kube.dns_label(text)
    except ValueError:
        return "unknown"


def aks_fields(pool: NodePool, name: str, price: Decimal, kind: str) -> dict[str, Any]:
    """The model fields of a workspace of ``kind`` on ``pool`` costing ``price`` USD/hour."""
    return {
        "kind": kind,
        "name": name,
        "node_pool": pool,
        "vm_size": pool.vm_size,
        "region": pool.cluster.location,
        "price_per_hour": price,
        "gpu_model": pool.gpu_model,
    }


class AksBackend:
    """The part of WorkspaceBackend (workspaces.backends.base) both AKS kinds share."""

    service = "Kubernetes"
    where = "the cluster"
    error_source = "Kubernetes or Azure"
    stop_label = "Stop"
    spot_capable = False  # its nodes are the pool's, never a Spot VM of its own
    disk_snapshots = False  # a pod or a namespace: no OS disk of its own to keep
    resizable = False
    # {operation: event reason}, formatted with the workspace's profile and gpus.
    finished: dict[str, str] = {}

    def send(
        self, api: kube.KubeApi, workspace: Workspace, operation: str, now: datetime | None
    ) -> None:
        """Send what ``operation`` asks of Kubernetes (idempotent; ``now`` None for a clean-up
        of a refused create)."""
        raise NotImplementedError

    def look(self, api: kube.KubeApi, workspace: Workspace, operation: str) -> Step:
        raise NotImplementedError

    def what(self, workspace: Workspace) -> str:
        """What a create makes, for the provisioning event."""
        raise NotImplementedError

    def on_created(self, workspace: Workspace, now: datetime) -> None:
        """Anything to do in the portal once the create is done."""

    def share(self, workspace: Workspace) -> tuple[int, int]:
        """The fraction of one node's price it costs while billable, as (num, den)."""
        raise NotImplementedError

    def sizing_offers(self, *, team: Team | None) -> list[SizingOffer]:
        """None by default: a namespace is a GPU quota on a pool, not a size to right-size."""
        return []

    def rightsizing_options(self, *, regions: set[str]) -> RightsizeOptions:
        """None by default: nothing moves to a namespace."""
        return {}

    def advance(self, workspace: Workspace, clock: Callable[[], datetime]) -> Next:
        """One step of the Kubernetes work the workspace's status owes. Raises CloudError."""
        if workspace.status == Status.REQUESTED:
            where = f"namespace {workspace.namespace} on node pool {pool_of(workspace).name}"
            moved = states.transition(
                workspace_id=workspace.pk,
                expected=Status.REQUESTED,
                to=Status.PROVISIONING,
                now=clock(),
                reason=f"Creating {self.what(workspace)} in {where}",
                waiting_reason="",
            )
            if not moved:
                return Next.DONE
            workspace.refresh_from_db()
        if workspace.status not in states.OPERATION:
            return Next.DONE
        step = self._act(kube_api(pool_of(workspace)), workspace, clock())
        if not step.done:
            if step.waiting != workspace.waiting_reason:
                workspaces_changed([workspace.pk])
            Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
                waiting_reason=step.waiting, updated_at=clock()
            )
            return Next.PENDING if step.waiting else Next.POLL
        return self._finish(workspace, clock())

    def _act(self, api: kube.KubeApi, workspace: Workspace, now: datetime) -> Step:
        """Send what the status owes once (remembered in ``operation``), then look."""
        operation = states.OPERATION[Status(workspace.status)][0]
        if workspace.operation != operation:
            self.send(api, workspace, operation, now)
            Workspace.objects.filter(pk=workspace.pk, status=workspace.status).update(
                operation=operation
            )
        return self.look(api, workspace, operation)

    def _finish(self, workspace: Workspace, now: datetime) -> Next:
        """Move to the status the operation leads to; stopped for a resize, on to Resizing
        (its backend's advance carries it: the chain goes on)."""
        operation, done = states.OPERATION[Status(workspace.status)]
        if operation == "create":
            self.on_created(workspace, now)
        reason = self.finished[operation].format(
            profile=workspace.mig_profile, gpus=counted(workspace.gpu_count, "GPU")
        )
        then = Next.DONE
        if operation == "deallocate" and workspace.resize_to:
            done, then = Status.RESIZING, Next.POLL
            reason += f"; moving it to {workspace.resize_to}"
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
        return then

    def clean_up_failed_create(self, workspace: Workspace) -> None:
        """Remove what a refused create left in Kubernetes (nothing half-made stays)."""
        self.send(kube_api(pool_of(workspace)), workspace, "delete", now=None)

    def meters(self, workspace: Workspace) -> Meters:
        """Its share of its node pool's VM price while running (states.BILLABLE_ON_AKS), with
        no disk of its own."""
        hourly: Decimal = pool_of(workspace).price_per_hour
        return Meters(billable=BILLABLE_ON_AKS, hourly=hourly, share=self.share(workspace))

    def gpu_share(self, workspace: Workspace) -> Fraction:
        return Fraction(workspace.gpu_count)

    def detail_context(self, workspace: Workspace, user: User | AnonymousUser) -> dict[str, object]:
        return {}

    def ide_target(self, workspace: Workspace) -> IdeTarget | None:
        return None  # A namespace runs what its team puts in it; a slice says otherwise.

    def connect_download(self, workspace: Workspace) -> tuple[str, bytes]:
        """The cluster's user kubeconfig (Entra ID login through kubelogin; it holds no
        secret), as (file name, YAML). Raises CloudError (CloudBusy, CloudTimeout: see
        workspaces.azure.azure_in_request)."""
        cluster = pool_of(workspace).cluster
        ref = cluster_ref(cluster)
        # A web request waits for it: bounded, with short timeouts (workspaces.azure).
        body = azure_in_request(lambda settings: aks.user_kubeconfig(settings, ref))
        return f"kubeconfig-{cluster.name}-{workspace.namespace}.yaml", body

    def idle_evidence(self, now: datetime) -> list[tuple[UUID, list[ParsedSample]]]:
        return []

    def access_to_refresh(self, *, owner: User) -> list[UUID]:
        return []

    def access_refresh(self, workspace: Workspace) -> None:
        """Nothing by default."""

    def resize_choices(self, workspace: Workspace, now: datetime) -> list[ResizeChoice]:
        """None by default: a namespace's GPU quota is changed by a new request."""
        return []


def nfs_volumes(workspace: Workspace) -> tuple[kube.NfsVolume, ...]:
    """The team's shares and the owner's home (storage, issue 33), at the paths a VM mounts
    them, through the Azure Files CSI driver."""
    return tuple(
        kube.NfsVolume(
            account=m.account,
            share=m.share,
            resource_group=settings.AZURE_RESOURCE_GROUP,
            path=m.path,
            read_only=m.read_only,
            size_gib=m.size_gib,
        )
        for m in hooks.workspace_mounts(workspace=workspace)
    )
