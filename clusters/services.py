"""Business rules for AKS clusters and their GPU node pools (platform admins only).

A cluster is registered after Azure confirms it exists (managedClusters GET). Node pools are
created through ``cloud.aks`` as long-running operations whose continuation token is saved
before waiting, so a worker that dies is resumed by the next one, never restarted blind; or
adopted when they already exist in Azure. Errors raised: ClusterError (message shown as is),
common.permissions.ActionNotAllowed (the actor may not manage clusters: clusters/rules.py).
"""

import contextlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction

from cloud import aks, azure_reservations
from cloud.errors import CloudError
from cloud.kube import dns_label
from clusters import mig
from clusters.models import POOL_IN_PROGRESS, AksCluster, ClusterTeam, NodePool, PoolStatus
from common.permissions import access_require
from teams.audit import audit_record
from teams.models import Team
from workspaces import chains
from workspaces.azure import azure_in_request, azure_settings, azure_usage_changed
from workspaces.chains import Next
from workspaces.models import SizeOffering
from workspaces.states import HELD

MANAGE = "clusters.manage_clusters"  # the one rule for every action here
POOL_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
TAINT = re.compile(r"^[A-Za-z0-9./_-]+(=[A-Za-z0-9._-]*)?:(NoSchedule|PreferNoSchedule|NoExecute)$")
LABEL_KEY = re.compile(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")

T = TypeVar("T")


class ClusterError(Exception):
    """What the platform admin asked cannot be done; the message says why, in words."""


def cluster_ref(cluster: AksCluster) -> aks.ClusterRef:
    return aks.ClusterRef(cluster.subscription_id, cluster.resource_group, cluster.name)


def _azure(action: str, call: Callable[[], T]) -> T:
    """Run a cloud call, turning Azure's refusal into a ClusterError that quotes it."""
    try:
        return call()
    except CloudError as exc:
        raise ClusterError(f"Azure refused to {action}: {exc.code}: {exc.message}") from exc


def cluster_register(
    *, actor: User, subscription_id: str, resource_group: str, name: str, now: datetime
) -> AksCluster:
    """Register an existing AKS cluster after Azure confirms it (one managedClusters GET);
    its location and Kubernetes version are Azure's. Raises ClusterError when Azure has no
    such cluster, refuses to say, or it is registered already."""
    access_require(user=actor, perm=MANAGE)
    ref = aks.ClusterRef(str(subscription_id).strip(), resource_group.strip(), name.strip())
    state = _azure("read the cluster", lambda: azure_in_request(lambda s: aks.cluster_get(s, ref)))
    if state is None:
        raise ClusterError(
            f"Azure has no AKS cluster {ref.name} in resource group {ref.resource_group} "
            f"of subscription {ref.subscription_id}."
        )
    try:
        with transaction.atomic():
            cluster = AksCluster.objects.create(
                subscription_id=ref.subscription_id,
                resource_group=ref.resource_group,
                name=ref.name,
                location=state.location,
                kubernetes_version=state.kubernetes_version,
                registered_by=actor,
                registered_at=now,
            )
    except IntegrityError as exc:
        raise ClusterError(f"{ref.name} is registered already.") from exc
    after = {"cluster": ref.name, "location": state.location}
    audit_record(
        actor=actor,
        team=None,
        action="cluster.register",
        obj=cluster,
        before={},
        after=after,
        now=now,
    )
    return cluster


def cluster_team_set(
    *, actor: User, cluster: AksCluster, team: Team, namespace: str = "", now: datetime
) -> ClusterTeam:
    """Give ``team`` the cluster and the namespace its MIG slice pods run in (default
    ``team-<slug>``); its namespace workspaces' RoleBindings name the team's own Entra ID group
    (Team.entra_group_id, linked on the team's page). Idempotent. Raises ClusterError (the
    namespace is not a DNS-1123 label)."""
    access_require(user=actor, perm=MANAGE)
    try:
        namespace = dns_label(namespace or f"team-{team.slug}")
    except ValueError as exc:
        raise ClusterError(str(exc)) from exc
    link, _ = ClusterTeam.objects.update_or_create(
        cluster=cluster, team=team, defaults={"namespace": namespace}
    )
    after = {"cluster": cluster.name, "namespace": namespace}
    audit_record(
        actor=actor, team=team, action="cluster.team", obj=link, before={}, after=after, now=now
    )
    return link


@dataclass(frozen=True)
class PoolRequest:
    """A node pool a platform admin asks for; counts are nodes, taints "key=value:Effect"."""

    name: str
    vm_size: str
    gpu_instance_profile: str = ""
    node_count: int = 1
    min_count: int | None = None
    max_count: int | None = None
    taints: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    # A capacity reservation group of the portal's resource group (a booking's, booking-<id>
    # on the platform's bookings page) whose reserved VMs become the nodes; "" none.
    capacity_reservation_group: str = ""


RESERVATION_GROUP = re.compile(r"^[A-Za-z0-9][-\w.]{0,79}$")


def pool_problem(*, cluster: AksCluster, ask: PoolRequest) -> str:
    """Why AKS (or the portal) would refuse this pool, in words; "" when it is fine. Checks
    the pool name rules, that the size has a price in the cluster's region (the catalog), that
    a MIG profile is asked only of an A100/H100 size, the counts, taints and labels."""
    if not POOL_NAME.match(ask.name):
        return "A node pool name is 1-12 lower-case letters and digits, starting with a letter."
    offering = SizeOffering.objects.filter(vm_size=ask.vm_size, region=cluster.location).first()
    if offering is None:
        return f"{ask.vm_size} has no Azure price in {cluster.location}, so it cannot be billed."
    if offering.gpu_partition != 1:
        # A namespace's quota and a pool's capacity count whole GPUs (nvidia.com/gpu).
        return (
            f"{ask.vm_size} ({offering.gpu_summary}) has a fractional GPU; pools need whole GPUs."
        )
    if ask.gpu_instance_profile and not mig.supports_mig(
        offering.gpu_model, offering.gpu_memory_gib
    ):
        return f"{ask.vm_size} ({offering.gpu_summary}) has no MIG mode; only A100 and H100 do."
    if (ask.min_count is None) != (ask.max_count is None):
        return "Autoscaling needs both a minimum and a maximum node count."
    if (
        ask.min_count is not None
        and ask.max_count is not None
        and not ask.min_count <= ask.node_count <= ask.max_count
    ):
        return "The node count must lie between the autoscaling minimum and maximum."
    bad = [t for t in ask.taints if not TAINT.match(t)]
    if bad:
        return f"Taints look like key=value:NoSchedule; not {bad[0]!r}."
    bad = [k for k, v in ask.labels if not (LABEL_KEY.match(k) and LABEL_VALUE.match(v))]
    if bad:
        return f"{bad[0]!r} is not a valid Kubernetes label."
    group = ask.capacity_reservation_group
    if group and not RESERVATION_GROUP.match(group):
        return "A capacity reservation group name is 1-80 letters, digits, - _ and ."
    return ""


def pool_create(*, actor: User, cluster: AksCluster, ask: PoolRequest, now: datetime) -> NodePool:
    """Record a new node pool as creating and queue its creation in Azure (agentPools PUT).
    Raises ClusterError (see pool_problem, or the name is taken in the portal)."""
    access_require(user=actor, perm=MANAGE)
    problem = pool_problem(cluster=cluster, ask=ask)
    if problem:
        raise ClusterError(problem)
    offering = SizeOffering.objects.get(vm_size=ask.vm_size, region=cluster.location)
    try:
        with transaction.atomic():
            pool = _insert_pool(cluster, ask, offering, PoolStatus.CREATING, now)
            _queue_pool(pool.pk)
    except IntegrityError as exc:
        raise ClusterError(f"{cluster.name} already has a node pool named {ask.name}.") from exc
    audit_record(
        actor=actor,
        team=None,
        action="pool.create",
        obj=pool,
        before={},
        after={
            "pool": pool.name,
            "vm_size": pool.vm_size,
            "gpu_instance_profile": pool.gpu_instance_profile,
            "nodes": pool.node_count,
            "capacity_reservation_group_id": pool.capacity_reservation_group_id,
        },
        now=now,
    )
    return pool


def _insert_pool(
    cluster: AksCluster, ask: PoolRequest, offering: SizeOffering, status: str, now: datetime
) -> NodePool:
    return NodePool.objects.create(
        cluster=cluster,
        name=ask.name,
        vm_size=offering.vm_size,
        gpu_model=offering.gpu_model,
        gpus_per_node=offering.gpu_count,
        gpu_memory_gib=offering.gpu_memory_gib,
        gpu_instance_profile=ask.gpu_instance_profile,
        node_count=ask.node_count,
        min_count=ask.min_count,
        max_count=ask.max_count,
        taints=list(ask.taints),
        labels=dict(ask.labels),
        capacity_reservation_group_id=_group_id(ask.capacity_reservation_group),
        price_per_hour=offering.price_per_hour,
        status=status,
        adopted=status == PoolStatus.READY,
        created_at=now,
        updated_at=now,
    )


def _group_id(name: str) -> str:
    """The fully qualified id of the portal's capacity reservation group ``name`` ("" none)."""
    return azure_reservations.group_id(azure_settings(), name=name) if name else ""


def _queue_pool(pool_id: int, claim: str = "") -> None:
    """Queue ``advance_pool`` after commit: the first run of a new chain, or with the
    ``claim`` of a chain the reconcile sweep took over (workspaces.chains)."""
    # A real cycle: clusters.tasks imports this module (advance_pool runs it).
    from clusters.tasks import advance_pool

    kwargs = {"claim": claim} if claim else {}
    transaction.on_commit(lambda: advance_pool.delay(pool_id, **kwargs))


def pools_adoptable(*, cluster: AksCluster) -> list[aks.PoolState]:
    """GPU agent pools Azure has in the cluster that the portal does not know yet (one
    agentPools list call, which a web request waits for: workspaces.azure.azure_in_request).
    Raises ClusterError when Azure refuses, is busy or does not answer in time."""
    known = set(cluster.pools.exclude(status=PoolStatus.DELETED).values_list("name", flat=True))
    ref = cluster_ref(cluster)
    pools = _azure(
        "list the node pools", lambda: azure_in_request(lambda s: aks.pools_list(s, ref))
    )
    gpu_sizes = set(
        SizeOffering.objects.filter(region=cluster.location, gpu_partition=1).values_list(
            "vm_size", flat=True
        )
    )
    return [p for p in pools if p.name not in known and p.vm_size in gpu_sizes]


def pool_adopt(*, actor: User, cluster: AksCluster, name: str, now: datetime) -> NodePool:
    """Take an existing GPU agent pool into the portal as it is in Azure (ready at once).
    Raises ClusterError when Azure has no such GPU pool or the portal knows it already."""
    access_require(user=actor, perm=MANAGE)
    found = {p.name: p for p in pools_adoptable(cluster=cluster)}.get(name)
    if found is None:
        raise ClusterError(f"{cluster.name} has no GPU node pool {name} left to adopt.")
    ask = PoolRequest(
        name=found.name,
        vm_size=found.vm_size,
        gpu_instance_profile=found.gpu_instance_profile,
        node_count=found.count,
        min_count=found.min_count,
        max_count=found.max_count,
        taints=tuple(found.taints),
        labels=tuple(found.labels),
    )
    offering = SizeOffering.objects.get(vm_size=found.vm_size, region=cluster.location)
    try:
        pool = _insert_pool(cluster, ask, offering, PoolStatus.READY, now)
    except IntegrityError as exc:
        raise ClusterError(f"{cluster.name} already has a node pool named {name}.") from exc
    audit_record(
        actor=actor,
        team=None,
        action="pool.adopt",
        obj=pool,
        before={},
        after={"pool": pool.name, "vm_size": pool.vm_size},
        now=now,
    )
    return pool


def pool_delete(*, actor: User, pool: NodePool, now: datetime) -> None:
    """Delete the pool in Azure (queued). Refused while a workspace not deleted runs on it, or
    while an operation is in flight. Raises ClusterError."""
    access_require(user=actor, perm=MANAGE)
    if pool.workspaces.filter(status__in=HELD).exists():
        raise ClusterError(f"Workspaces still use {pool.name}: delete them first.")
    if not _pool_transition(pool, (PoolStatus.READY, PoolStatus.FAILED), PoolStatus.DELETING, now):
        raise ClusterError(f"{pool.name} is busy; try again when it is ready.")
    audit_record(
        actor=actor,
        team=None,
        action="pool.delete",
        obj=pool,
        before={"pool": pool.name},
        after={},
        now=now,
    )


def _pool_transition(
    pool: NodePool, expected: Iterable[str], to: str, now: datetime, **fields: object
) -> bool:
    """Compare-and-set the pool's status; queue its operation when it now owes one, handing
    the row to that new chain (workspaces.chains). A new status starts a new count of failed
    attempts."""
    if to in POOL_IN_PROGRESS:
        fields.update(chains.RELEASED)
    with transaction.atomic():
        moved = NodePool.objects.filter(pk=pool.pk, status__in=expected).update(
            status=to, updated_at=now, operation_attempts=0, **fields
        )
        if moved and to in POOL_IN_PROGRESS:
            _queue_pool(pool.pk)
    return bool(moved)


def pool_advance(*, pool_id: int, clock: Callable[[], datetime]) -> Next:
    """Move the pool's Azure operation (create or delete) one step on: start it and save its
    continuation token, or poll it once from the saved token. Returns Next.POLL while Azure
    works, Next.DONE otherwise. A permanent refusal marks the pool failed with Azure's code
    and message (a failed create is also deleted in Azure, so nothing half-made is billed).
    Raises CloudError for transient errors (the task retries)."""
    pool = NodePool.objects.select_related("cluster").filter(pk=pool_id).first()
    if pool is None or pool.status not in POOL_IN_PROGRESS:
        return Next.DONE
    operation = "create" if pool.status == PoolStatus.CREATING else "delete"
    try:
        progress = _pool_operation(pool, operation)
    except CloudError as exc:
        if exc.transient:
            raise
        _pool_failed(pool, operation, exc, clock())
        return Next.DONE
    if not progress.done:
        NodePool.objects.filter(pk=pool.pk, status=pool.status).update(updated_at=clock())
        return Next.POLL
    done: dict[str, object] = {"operation_token": "", "error_code": "", "error_message": ""}
    if progress.pool is not None:
        done["node_count"] = progress.pool.count
    _usage_changed(pool)
    to = PoolStatus.READY if operation == "create" else PoolStatus.DELETED
    _pool_transition(pool, (pool.status,), to, clock(), **done)
    return Next.DONE


def _usage_changed(pool: NodePool) -> None:
    """The pool's nodes count against the region's vCPU quota: Azure headroom must be read
    again (workspaces.azure.azure_usage_changed)."""
    azure_usage_changed(region=pool.cluster.location)


def _pool_operation(pool: NodePool, operation: str) -> aks.PoolProgress:
    settings, ref = azure_settings(), cluster_ref(pool.cluster)
    token = pool.operation_token
    if not token:
        spec = _pool_spec(pool) if operation == "create" else None
        token = aks.pool_begin(settings, ref, operation, name=pool.name, spec=spec)
        _usage_changed(pool)
        # Saved before polling: the worker that takes over after a crash resumes from it.
        NodePool.objects.filter(pk=pool.pk, status=pool.status).update(operation_token=token)
    return aks.pool_poll(settings, ref, operation, name=pool.name, token=token)


def _pool_spec(pool: NodePool) -> aks.PoolSpec:
    return aks.PoolSpec(
        name=pool.name,
        vm_size=pool.vm_size,
        gpu_instance_profile=pool.gpu_instance_profile,
        count=pool.node_count,
        min_count=pool.min_count,
        max_count=pool.max_count,
        taints=tuple(pool.taints),
        labels=tuple(sorted(pool.labels.items())),
        capacity_reservation_group_id=pool.capacity_reservation_group_id,
    )


def pool_operation_failed(*, pool_id: int, error: CloudError, now: datetime) -> None:
    """Record that Azure kept refusing the pool's operation (retries spent): failed, with
    Azure's code and message."""
    pool = NodePool.objects.select_related("cluster").filter(pk=pool_id).first()
    if pool is not None and pool.status in POOL_IN_PROGRESS:
        operation = "create" if pool.status == PoolStatus.CREATING else "delete"
        _pool_failed(pool, operation, error, now)


def _pool_failed(pool: NodePool, operation: str, error: CloudError, now: datetime) -> None:
    if operation == "create":
        # Best effort: a pool left Failed in Azure would still bill its nodes.
        with contextlib.suppress(CloudError):
            aks.pool_begin(azure_settings(), cluster_ref(pool.cluster), "delete", name=pool.name)
    _pool_transition(
        pool,
        (pool.status,),
        PoolStatus.FAILED,
        now,
        operation_token="",
        error_code=error.code,
        error_message=error.message,
    )


def pool_reconcile(*, now: datetime, stale_before: datetime) -> list[int]:
    """Take over and queue again the operation of pools in progress whose chain of tasks is
    lost (its next run due before ``stale_before``, or held by no chain and unchanged since);
    a chain waiting for its next run is left alone. Returns the ids queued."""
    ids = NodePool.objects.filter(
        chains.lost(stale_before=stale_before), status__in=POOL_IN_PROGRESS
    ).values_list("pk", flat=True)
    queued = []
    for pool_id in list(ids):
        rows = NodePool.objects.filter(pk=pool_id, status__in=POOL_IN_PROGRESS)
        claim = chains.take_over(rows, stale_before=stale_before, now=now)
        if claim:
            _queue_pool(pool_id, claim=claim)
            queued.append(pool_id)
    return queued


def pool_resend_create(*, pool: NodePool, now: datetime) -> bool:
    """Send a ready or failed pool's create again (an idempotent agentPools PUT: Azure keeps
    what matches and completes what is missing), e.g. after a demo emulator restarted empty.
    False when the pool was busy or deleted."""
    return _pool_transition(
        pool, (PoolStatus.READY, PoolStatus.FAILED), PoolStatus.CREATING, now, operation_token=""
    )
