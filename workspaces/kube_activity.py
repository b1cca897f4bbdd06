"""Idle evidence of AKS namespace workspaces: Kubernetes is their agent.

A namespace is busy while a pod in it that requests GPUs runs, and idle otherwise. Every
AGENT_INTERVAL_SECONDS (Celery beat) the portal counts such pods in each running namespace and
stores the result as one telemetry sample (GPU utilisation 100 % when any runs, else 0 %), so
the idle policy and sweep judge namespaces exactly as they judge VMs and MIG slices: no
running GPU pod for the policy's idle time means warned, then stopped.
"""

import logging
from datetime import datetime

from cloud import kube
from cloud.errors import CloudError
from workspaces.heartbeats import heartbeats_store_isolated
from workspaces.models import Kind, Workspace
from workspaces.states import Status
from workspaces.telemetry import ParsedSample

log = logging.getLogger(__name__)


def namespace_activity_scan(*, now: datetime) -> int:
    """Store one sample per running namespace workspace: how many of its pods that request
    GPUs run (one Kubernetes list per namespace). Returns how many were stored. A cluster
    that does not answer is logged and skipped; its namespaces simply get no sample (a gap,
    as a silent agent). Samples the database fails to take are not retried: the next scan
    counts again, and the sweep does not count the failure as silence."""
    from workspaces.aks_services import kube_api

    running = Workspace.objects.filter(kind=Kind.NAMESPACE, status=Status.RUNNING).select_related(
        "node_pool__cluster"
    )
    batch = []
    for workspace in running:
        try:
            pods = kube.namespace_gpu_pods(kube_api(workspace.node_pool), name=workspace.namespace)
        except CloudError as exc:
            log.warning("GPU pods of %s: %s: %s", workspace.namespace, exc.code, exc.message)
            continue
        batch.append((workspace.pk, [_sample(pods, now)]))
    # Isolated: one namespace's sample the database refuses must not cost the others theirs.
    return sum(heartbeats_store_isolated(batch=batch, now=now)[0].values()) if batch else 0


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
