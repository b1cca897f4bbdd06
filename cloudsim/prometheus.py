"""The Prometheus HTTP API's instant query (GET /prometheus/api/v1/query?query=...), answering
for the NVIDIA DCGM exporter of every simulated AKS cluster.

Each running pod that holds GPUs (nvidia.com/gpu) or a MIG device (nvidia.com/mig-<profile>)
shows the series dcgm-exporter writes for it with Kubernetes pod mapping on: labels gpu, UUID,
device, modelName, Hostname, GPU_I_PROFILE and GPU_I_ID (MIG only), pod, namespace, container,
plus cluster, as Azure Monitor's managed Prometheus adds it. The values follow the same agent
profiles the emulator plays heartbeats with (cloudsim.agents; /_sim/agents/profile), looked up
by the pod's name, its owner's name, then its namespace's, else the default profile:

- busy and batch: DCGM_FI_DEV_GPU_UTIL 80-98 (%; whole GPUs only, DCGM does not count it per MIG
  instance), DCGM_FI_PROF_GR_ENGINE_ACTIVE 0.80-0.98 (ratio),
  DCGM_FI_DEV_FB_USED 60-90 % of the device's memory (MiB);
- idle: 0, 0.0 and ~0.5 GiB (the CUDA context);
- spiky: idle, but busy during one minute in DEFAULT_SPIKE_EVERY (by wall clock);
- silent: no series (an exporter that does not see the pod).

Only the query shapes the portal sends are understood: a metric name with an optional
{label="value", label!="value"} selector. Anything else is a Prometheus "bad_data" 400.
Response shape: https://prometheus.io/docs/prometheus/latest/querying/api/#instant-queries
"""

import random
import re
import time
from typing import TYPE_CHECKING

from .agent_protocol import DEFAULT_SPIKE_EVERY, GPU_BUSY_PROFILES, gpu_model, mig_memory_mib
from .protocol import Request, Response

if TYPE_CHECKING:
    from .cloud import Cloud

QUERY_PATH = "/prometheus/api/v1/query"
UTIL, ENGINE, FB_USED = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
)
METRICS = (UTIL, ENGINE, FB_USED)
MIG_PREFIX, GPU = "nvidia.com/mig-", "nvidia.com/gpu"
_QUERY = re.compile(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*(?:\{(.*)\})?\s*")
_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=|!=)\s*"([^"\\]*)"\s*(?:,|$)')


def owns(path: str) -> bool:
    return path == QUERY_PATH


def handle(cloud: "Cloud", req: Request) -> Response:
    """Answer one instant query; never raises."""
    parsed = _parse(req.query.get("query", ""))
    if parsed is None:
        return _bad('parse error: only metric{label="v",label!="v"} is understood')
    metric, matchers = parsed
    now = time.time()
    with cloud.lock:
        series = [s for s in _series(cloud, metric, now) if _matches(s, matchers)]
    result = [{"metric": labels, "value": [round(now, 3), value]} for labels, value in series]
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return Response(200, body)


def _bad(error: str) -> Response:
    return Response(400, {"status": "error", "errorType": "bad_data", "error": error})


def _parse(query: str) -> tuple[str, list[tuple[str, str, str]]] | None:
    match = _QUERY.fullmatch(query)
    if match is None:
        return None
    inner, matchers = match.group(2) or "", []
    pos = 0
    while pos < len(inner.strip()):
        found = _MATCHER.match(inner, pos)
        if found is None:
            return None
        matchers.append((found.group(1), found.group(2), found.group(3)))
        pos = found.end()
    return match.group(1), matchers


def _matches(series: tuple[dict, str], matchers: list[tuple[str, str, str]]) -> bool:
    labels = series[0]
    return all((labels.get(k, "") == v) == (op == "=") for k, op, v in matchers)


def _series(cloud: "Cloud", metric: str, now: float) -> list[tuple[dict, str]]:
    """The metric's series over every cluster; the caller holds cloud.lock."""
    if metric not in METRICS:
        return []
    found = []
    for cluster in cloud.kube.clusters.values():
        for pod in cluster.items("pods"):
            if (pod.get("status") or {}).get("phase") != "Running":
                continue
            for index, container in enumerate((pod.get("spec") or {}).get("containers") or []):
                found.extend(_container_series(cloud, cluster, pod, container, index, metric, now))
    return found


def _container_series(cloud, cluster, pod, container, index, metric, now):
    mig, gpus = _devices(container)
    if (mig is None and gpus < 1) or (mig and metric == UTIL):  # Not counted per MIG instance.
        return []
    meta = pod["metadata"]
    profile = _profile(cloud, pod)
    if profile == "silent":
        return []
    node = cluster.get("nodes", "", (pod.get("spec") or {}).get("nodeName") or "")
    node_labels = (node or {}).get("metadata", {}).get("labels") or {}
    model = gpu_model(node_labels.get("node.kubernetes.io/instance-type", ""))
    memory = mig_memory_mib(mig) if mig else model.memory_mib
    spike = profile == "spiky" and int(now // 60) % DEFAULT_SPIKE_EVERY == 0
    busy = profile in GPU_BUSY_PROFILES or spike
    rng = random.Random(f"{meta.get('uid', meta['name'])}:{metric}:{int(now)}")
    base = {
        "modelName": model.name or "",
        "Hostname": (node or {}).get("metadata", {}).get("name", ""),
        "pod": meta["name"],
        "namespace": meta.get("namespace", ""),
        "container": container.get("name", ""),
        "cluster": cluster.name,
    }
    rows = []
    for gpu in range(1 if mig else gpus):
        labels = {"gpu": str(index + gpu), "UUID": f"GPU-{meta.get('uid', '')}-{gpu}"}
        labels["device"] = f"nvidia{index + gpu}"
        if mig:
            labels.update(GPU_I_PROFILE=mig, GPU_I_ID=str(index + 1))
        rows.append(({**labels, **base}, _value(metric, busy, memory, rng)))
    return rows


def _value(metric: str, busy: bool, memory_mib: int, rng: random.Random) -> str:
    if metric == UTIL:
        return str(rng.randint(80, 98) if busy else 0)
    if metric == ENGINE:
        return f"{rng.uniform(0.8, 0.98):.6f}" if busy else "0"
    used = int(memory_mib * rng.uniform(0.6, 0.9)) if busy else rng.randint(480, 560)
    return str(min(used, memory_mib))


def _profile(cloud: "Cloud", pod: dict) -> str:
    meta = pod["metadata"]
    owners = [r.get("name", "") for r in meta.get("ownerReferences") or []]
    book = cloud.agents
    for name in (meta["name"], *owners, meta.get("namespace", "")):
        if name and name.lower() in book.profiles:
            return book.profiles[name.lower()]
    return book.default_profile


def _devices(container: dict) -> tuple[str | None, int]:
    """(MIG profile, whole GPUs) the container holds, from its limits and requests."""
    resources = container.get("resources") or {}
    wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    mig = next((k.removeprefix(MIG_PREFIX) for k in wanted if k.startswith(MIG_PREFIX)), None)
    try:
        gpus = int(wanted.get(GPU, 0))
    except (TypeError, ValueError):
        gpus = 0
    return mig, gpus
