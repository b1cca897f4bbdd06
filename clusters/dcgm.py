"""GPU evidence from the NVIDIA DCGM exporter, when settings.PROMETHEUS_URL names the
Prometheus that scrapes it (cloud.prometheus). Optional: unset, or Prometheus failing, gives
None, and the AKS backends fall back: namespaces to counting pods that hold GPUs, MIG slices
to their agent's heartbeats alone."""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings

from cloud import prometheus
from cloud.errors import CloudError
from cloud.prometheus import DcgmUse, NamespaceGpuUse, PodGpuUse

log = logging.getLogger(__name__)

# The last reading and the (URL, scan time) it was taken for: the namespace and MIG backends scan
# at the same ``now`` (workspaces.kube_activity), and share one reading (three queries).
_last: list[tuple[tuple[str, datetime], DcgmUse | None]] = []


def dcgm_use_read(*, now: datetime | None = None) -> DcgmUse | None:
    """GPU use by namespace and by pod, or None when PROMETHEUS_URL is unset or Prometheus
    failed (logged as a warning; the caller falls back). With ``now``, a second call for the
    same ``now`` answers the first one's reading without asking Prometheus again."""
    url = settings.PROMETHEUS_URL
    if not url:
        return None
    if now is not None and _last and _last[0][0] == (url, now):
        return _last[0][1]
    try:
        use: DcgmUse | None = prometheus.dcgm_use(url=url, timeout=settings.PROMETHEUS_TIMEOUT)
    except CloudError as exc:
        log.warning("DCGM through Prometheus: %s: %s; using the fallback", exc.code, exc.message)
        use = None
    if now is not None:
        _last[:] = [((url, now), use)]
    return use


def dcgm_use_of(use: DcgmUse, *, cluster: str, namespace: str) -> NamespaceGpuUse | None:
    """The namespace's use on ``cluster`` (AKS name), or under no cluster label (a Prometheus
    per cluster adds none); None when DCGM sees no GPU of it."""
    found = use.namespaces
    return found.get((cluster, namespace)) or found.get(("", namespace))


def dcgm_pod_use_of(use: DcgmUse, *, cluster: str, namespace: str, pod: str) -> PodGpuUse | None:
    """The pod's use on ``cluster`` (or under no cluster label); None when DCGM sees no GPU
    or MIG device held by it."""
    found = use.pods
    return found.get((cluster, namespace, pod)) or found.get(("", namespace, pod))
