"""GPU evidence from the NVIDIA DCGM exporter, when settings.PROMETHEUS_URL names the
Prometheus that scrapes it (cloud.prometheus). Optional: unset, or Prometheus failing, gives
None, and the AKS backends fall back to counting pods that hold GPUs."""

from __future__ import annotations

import logging

from django.conf import settings

from cloud import prometheus
from cloud.errors import CloudError
from cloud.prometheus import NamespaceGpuUse

log = logging.getLogger(__name__)

DcgmUse = dict[tuple[str, str], NamespaceGpuUse]


def dcgm_use_read() -> DcgmUse | None:
    """GPU use by (cluster label, namespace), or None when PROMETHEUS_URL is unset or
    Prometheus failed (logged as a warning; the caller falls back)."""
    url = settings.PROMETHEUS_URL
    if not url:
        return None
    try:
        return prometheus.dcgm_namespace_use(url=url, timeout=settings.PROMETHEUS_TIMEOUT)
    except CloudError as exc:
        log.warning("DCGM through Prometheus: %s: %s; counting GPU pods", exc.code, exc.message)
        return None


def dcgm_use_of(use: DcgmUse, *, cluster: str, namespace: str) -> NamespaceGpuUse | None:
    """The namespace's use on ``cluster`` (AKS name), or under no cluster label (a Prometheus
    per cluster adds none); None when DCGM sees no GPU of it."""
    return use.get((cluster, namespace)) or use.get(("", namespace))
