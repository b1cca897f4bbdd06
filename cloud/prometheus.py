"""GPU use per Kubernetes namespace from the NVIDIA DCGM exporter, read through the Prometheus
HTTP API (instant queries: GET <url>/api/v1/query?query=...; response shape per
https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries).

Series and labels are dcgm-exporter's with Kubernetes pod mapping on (NVIDIA/dcgm-exporter:
gpu, UUID, device, modelName, Hostname, GPU_I_PROFILE and GPU_I_ID on a MIG instance, and pod,
namespace, container of the pod holding the device). A Prometheus that scrapes the exporter
without honor_labels renames them exported_pod / exported_namespace: those win when present.
Azure Monitor's managed Prometheus adds ``cluster`` (the AKS cluster's name).

Plain ``requests``: three GETs, no SDK needed. Returns dataclasses; raises CloudError.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import requests

from cloud.errors import CloudError

UTIL = "DCGM_FI_DEV_GPU_UTIL"  # Percent, 0-100, per GPU.
ENGINE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # Ratio, 0-1, per GPU or per MIG instance.
FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB of frame buffer used.
MAX_ANSWER = 8 * 1024 * 1024  # Bytes of a query answer worth reading.
Labels = dict[str, str]


@dataclass(frozen=True)
class NamespaceGpuUse:
    """GPU use of one namespace at query time. cluster: the ``cluster`` label ("" when
    Prometheus adds none); gpu_util: percent, the busiest device, from DCGM_FI_DEV_GPU_UTIL or
    (on a MIG instance, where it is not counted) DCGM_FI_PROF_GR_ENGINE_ACTIVE x 100;
    fb_used_mib: MiB over all its devices; devices: series seen; pods: their pod names."""

    cluster: str
    namespace: str
    gpu_util: int
    fb_used_mib: int
    devices: int
    pods: tuple[str, ...]


@dataclass(frozen=True)
class PodGpuUse:
    """GPU use of one pod at query time (a MIG slice's pod: one MIG instance). gpu_util and
    fb_used_mib as NamespaceGpuUse's; mig_profile: its GPU_I_PROFILE ("1g.10gb"), "" for
    whole GPUs."""

    cluster: str
    namespace: str
    pod: str
    gpu_util: int
    fb_used_mib: int
    mig_profile: str


@dataclass(frozen=True)
class DcgmUse:
    """One reading of DCGM: by (cluster, namespace) and by (cluster, namespace, pod)."""

    namespaces: dict[tuple[str, str], NamespaceGpuUse]
    pods: dict[tuple[str, str, str], PodGpuUse]


def dcgm_namespace_use(*, url: str, timeout: float = 5.0) -> dict[tuple[str, str], NamespaceGpuUse]:
    """GPU use by (cluster, namespace) for every namespace with a pod holding a GPU or a MIG
    device (dcgm_use's namespaces). Raises CloudError as dcgm_use."""
    return dcgm_use(url=url, timeout=timeout).namespaces


def dcgm_use(*, url: str, timeout: float = 5.0) -> DcgmUse:
    """GPU use by namespace and by pod, from three instant queries. Raises CloudError
    ("PrometheusUnavailable", transient) when Prometheus does not answer, or
    ("PrometheusBadAnswer") when it answers something else than a success vector."""
    namespaces: dict[tuple[str, str], dict[str, Any]] = {}
    pods: dict[tuple[str, str, str], dict[str, Any]] = {}
    for metric in (UTIL, ENGINE, FB_USED):
        for labels, value in _query(url, f'{metric}{{namespace!=""}}', timeout):
            cluster, pod = labels.get("cluster", ""), _label(labels, "pod")
            key = (cluster, _label(labels, "namespace"))
            _add(namespaces.setdefault(key, _empty()), metric, labels, value)
            if pod:
                _add(pods.setdefault((*key, pod), _empty()), metric, labels, value)
    return DcgmUse(
        namespaces={
            key: NamespaceGpuUse(
                cluster=key[0],
                namespace=key[1],
                gpu_util=min(100, round(e["util"])),
                fb_used_mib=round(e["fb"]),
                devices=len(e["devices"]),
                pods=tuple(sorted(p for p in e["pods"] if p)),
            )
            for key, e in namespaces.items()
        },
        pods={
            key: PodGpuUse(
                cluster=key[0],
                namespace=key[1],
                pod=key[2],
                gpu_util=min(100, round(e["util"])),
                fb_used_mib=round(e["fb"]),
                mig_profile=min(e["profiles"], default=""),
            )
            for key, e in pods.items()
        },
    )


def _empty() -> dict[str, Any]:
    return {"util": 0.0, "fb": 0.0, "devices": set(), "pods": set(), "profiles": set()}


def _add(entry: dict[str, Any], metric: str, labels: Labels, value: float) -> None:
    """Count one series into a namespace's or a pod's entry."""
    profile = labels.get("GPU_I_PROFILE", "")
    if metric == FB_USED:
        entry["fb"] += value
    elif metric == ENGINE:
        entry["util"] = max(entry["util"], value * 100)
    elif not profile:  # DCGM does not count it per MIG instance.
        entry["util"] = max(entry["util"], value)
    entry["devices"].add((labels.get("Hostname"), labels.get("UUID"), labels.get("GPU_I_ID")))
    entry["pods"].add(_label(labels, "pod"))
    if profile:
        entry["profiles"].add(profile)


def _label(labels: Labels, name: str) -> str:
    return labels.get(f"exported_{name}") or labels.get(name, "")


def _query(url: str, query: str, timeout: float) -> list[tuple[Labels, float]]:
    try:
        response = requests.get(
            f"{url.rstrip('/')}/api/v1/query", params={"query": query}, timeout=timeout
        )
        body = response.json() if len(response.content) <= MAX_ANSWER else None
    except (requests.RequestException, ValueError) as exc:
        raise CloudError("PrometheusUnavailable", str(exc), transient=True) from exc
    if response.status_code != 200 or not isinstance(body, dict):
        raise CloudError(
            "PrometheusUnavailable",
            f"HTTP {response.status_code} for {query}",
            status=response.status_code,
            transient=response.status_code >= 500 or response.status_code == 429,
        )
    return _vector(body, query)


def _vector(body: dict[str, Any], query: str) -> list[tuple[Labels, float]]:
    data = body.get("data")
    if body.get("status") != "success" or not isinstance(data, dict):
        raise CloudError("PrometheusBadAnswer", f"{body.get('error', 'no data')} for {query}")
    if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise CloudError("PrometheusBadAnswer", f"not an instant vector for {query}")
    rows = []
    for item in data["result"]:
        try:
            labels, (_, text) = item["metric"], item["value"]
            value = float(text)
        except (KeyError, TypeError, ValueError) as exc:
            raise CloudError("PrometheusBadAnswer", f"odd sample for {query}") from exc
        if isinstance(labels, dict) and math.isfinite(value) and value >= 0:
            rows.append(({str(k): str(v) for k, v in labels.items()}, value))
    return rows
