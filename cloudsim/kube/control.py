"""The /_sim/k8s control endpoints (see cloudsim.control_api's module docs)."""

from ..errors import ArmError
from . import PoolShape, server_path
from .admission import pod_requests
from .quantity import render
from .store import KubeError

_POOL_FIELDS = {
    "name": str,
    "vm_size": str,
    "count": int,
    "vcpus": int,
    "memory_gb": (int, float),
    "gpus": int,
    "gpu_model": str,
    "gpu_instance_profile": str,
}


def _bad(message: str) -> ArmError:
    return ArmError(400, "InvalidControlRequest", message)


def _text(body: dict, name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise _bad(f"'{name}' is required and must be a non-empty string.")
    return value


def cluster_key(body: dict) -> tuple[str, str]:
    """(ARM id key, name) of the cluster the body names by subscription, resource_group, name."""
    sub, group, name = (_text(body, k) for k in ("subscription", "resource_group", "name"))
    key = (
        f"/subscriptions/{sub}/resourcegroups/{group}/providers/"
        f"microsoft.containerservice/managedclusters/{name}"
    )
    return key.lower(), name


def pool_shape(raw) -> PoolShape:
    """A PoolShape from its JSON form (the dataclass's fields; taints a list, labels an object)."""
    if not isinstance(raw, dict):
        raise _bad("Each pool must be an object.")
    values = {}
    for field, kind in _POOL_FIELDS.items():
        value = raw.get(field, "" if field == "gpu_instance_profile" else None)
        if isinstance(value, bool) or not isinstance(value, kind):
            raise _bad(f"Pool field '{field}' is required and has the wrong type.")
        values[field] = value
    taints, labels = raw.get("taints", []), raw.get("labels", {})
    if not isinstance(taints, list) or not all(isinstance(t, str) and ":" in t for t in taints):
        raise _bad("Pool 'taints' must be a list of 'key=value:Effect' strings.")
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise _bad("Pool 'labels' must be an object of strings.")
    if values["count"] < 0 or values["gpus"] < 0:
        raise _bad("Pool 'count' and 'gpus' must not be negative.")
    return PoolShape(**values, taints=tuple(taints), labels=dict(labels))


def ensure(cloud, body: dict) -> dict:
    """POST /_sim/k8s/clusters: make a cluster (and the given pools) exist."""
    key, name = cluster_key(body)
    pools = body.get("pools", [])
    if not isinstance(pools, list):
        raise _bad("'pools' must be a list.")
    shapes = [pool_shape(raw) for raw in pools]
    cloud.kube.ensure_cluster(key, name=name)
    for shape in shapes:
        cloud.kube.sync_pool(key, shape)
    server = server_path(body["subscription"], body["resource_group"], name)
    return {"key": key, "server": server}


def drop_pool(cloud, body: dict) -> dict:
    """POST /_sim/k8s/pools/drop: the pool's nodes go; their pods go back to Pending."""
    key, _ = cluster_key(body)
    if key not in cloud.kube.clusters:
        raise ArmError(404, "NotFound", "No such simulated cluster.")
    cloud.kube.drop_pool(key, _text(body, "pool"))
    return {"key": key, "pool": body["pool"]}


def state(cloud, now: float) -> dict:
    """GET /_sim/k8s: every cluster's nodes and pods, after running its controllers."""
    clusters = []
    for key, cluster in cloud.kube.clusters.items():
        cluster.reconcile(now, cloud.latency)
        nodes = [
            {
                "name": n["metadata"]["name"],
                "pool": n["metadata"]["labels"]["agentpool"],
                "allocatable": n["status"]["allocatable"],
            }
            for n in cluster.items("nodes")
        ]
        pods = [_pod_state(pod) for pod in cluster.items("pods")]
        clusters.append(
            {
                "key": key,
                "name": cluster.name,
                "server": cluster.prefix,
                "resourceVersion": str(cluster.rv),
                "pools": sorted(cluster.pools),
                "namespaces": [n["metadata"]["name"] for n in cluster.items("namespaces")],
                "nodes": nodes,
                "pods": pods,
            }
        )
    return {"clusters": clusters}


def _pod_state(pod: dict) -> dict:
    conditions = pod["status"].get("conditions") or []
    scheduled = next((c for c in conditions if c["type"] == "PodScheduled"), {})
    return {
        "namespace": pod["metadata"]["namespace"],
        "name": pod["metadata"]["name"],
        "phase": pod["status"].get("phase"),
        "node": pod["spec"].get("nodeName"),
        "ready": any(c["type"] == "Ready" and c["status"] == "True" for c in conditions),
        "reason": scheduled.get("reason", ""),
        "message": scheduled.get("message", ""),
        "requests": {k: render(v) for k, v in pod_requests(pod).items()},
    }


def _entry(cluster, obj: dict) -> dict:
    meta = obj["metadata"]
    found = {"cluster": cluster.name, "name": meta["name"], "labels": meta.get("labels") or {}}
    if meta.get("namespace"):
        found["namespace"] = meta["namespace"]
    return found


SNAPSHOT_FIELDS = {
    "namespaces": lambda o: {"phase": o["status"].get("phase")},
    "pods": _pod_state,
    "services": lambda o: {
        "clusterIP": o["spec"].get("clusterIP"),
        "ports": o["spec"].get("ports"),
    },
    "persistentvolumeclaims": lambda o: {
        "phase": o["status"].get("phase"),
        "storage": o["spec"]["resources"]["requests"]["storage"],
        "terminating": bool(o["metadata"].get("deletionTimestamp")),
    },
    "resourcequotas": lambda o: {"hard": o["status"]["hard"], "used": o["status"]["used"]},
    "limitranges": lambda o: {"limits": o["spec"].get("limits")},
    "rolebindings": lambda o: {"roleRef": o.get("roleRef"), "subjects": o.get("subjects")},
    "roles": lambda o: {"rules": o.get("rules")},
    "networkpolicies": lambda o: {"spec": o.get("spec")},
    "secrets": lambda o: {"type": o.get("type"), "keys": sorted(o.get("data") or {})},
    "deployments": lambda o: {"replicas": o["spec"].get("replicas"), **_ready(o)},
    "statefulsets": lambda o: {"replicas": o["spec"].get("replicas"), **_ready(o)},
    "nodes": lambda o: {
        "pool": o["metadata"]["labels"]["agentpool"],
        "allocatable": o["status"]["allocatable"],
    },
}


def _ready(obj: dict) -> dict:
    return {"readyReplicas": (obj.get("status") or {}).get("readyReplicas", 0)}


def snapshot(cloud, now: float) -> dict:
    """The "kubernetes" part of /_sim/state: objects of every cluster by resource plural, each
    {"cluster", "namespace"?, "name", "labels", ...what a test looks at}; secrets show their
    keys, never values."""
    found: dict[str, list] = {plural: [] for plural in SNAPSHOT_FIELDS}
    for cluster in cloud.kube.clusters.values():
        cluster.reconcile(now, cloud.latency)
        for plural, fields in SNAPSHOT_FIELDS.items():
            for obj in cluster.items(plural):
                found[plural].append({**_entry(cluster, obj), **fields(obj)})
    return found


def create_namespace(cloud, body: dict, now: float) -> dict:
    """POST /_sim/k8s/namespaces {"cluster", "name", "labels"={}}: a namespace made by
    someone outside the portal (cluster: the managed cluster's name)."""
    name, labels = _text(body, "name"), body.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise _bad("'labels' must be an object of strings.")
    wanted = _text(body, "cluster").lower()
    clusters = [c for c in cloud.kube.clusters.values() if c.name.lower() == wanted]
    if len(clusters) != 1:
        raise ArmError(404, "NotFound", f"No single simulated cluster named '{wanted}'.")
    try:
        made = clusters[0].create("namespaces", {"metadata": {"name": name, "labels": labels}}, now)
    except KubeError as err:
        raise ArmError(err.code, err.reason, err.message) from None
    return {"cluster": clusters[0].name, "name": made["metadata"]["name"]}
