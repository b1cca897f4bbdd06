"""Idle evidence the portal collects itself, for kinds whose agent does not report on its own.

Every AGENT_INTERVAL_SECONDS (Celery beat) each backend's idle_evidence (workspaces.backends;
AKS namespaces, where Kubernetes is their agent) gives one telemetry sample per running
workspace, stored as an agent's would be, so the idle policy and sweep judge them
exactly as they judge VMs and MIG slices: no GPU use for the policy's idle time means warned,
then stopped. MIG slices give no samples here but DCGM readings, merged into their agents'
samples as those are stored (workspaces.gpu_evidence).
"""

from datetime import datetime

from workspaces.backends import backends
from workspaces.heartbeats import heartbeats_store_isolated


def namespace_activity_scan(*, now: datetime) -> int:
    """Store the samples every backend collects (see WorkspaceBackend.idle_evidence). Returns
    how many were stored. Samples the database fails to take are not retried: the next scan
    counts again, and the sweep does not count the failure as silence."""
    batch = [pair for backend in backends() for pair in backend.idle_evidence(now)]
    # Isolated: one workspace's sample the database refuses must not cost the others theirs.
    return sum(heartbeats_store_isolated(batch=batch, now=now)[0].values()) if batch else 0
