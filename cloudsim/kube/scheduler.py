"""The default scheduler's filters and the kubelet's start-up, reduced to what matters here.

Filters in kube-scheduler's order (TaintToleration, NodeAffinity, NodeResourcesFit); the first
node that passes gets the pod. An unschedulable pod's message is the scheduler's FitError text:
``0/3 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb, 2 node(s) didn't match
Pod's node affinity/selector.`` (reason counts, sorted as strings).
"""

import copy
from collections import Counter
from fractions import Fraction

from . import quantity
from .admission import TERMINAL, pod_requests
from .store import timestamp

SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
HARD_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol["effect"] != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol["key"] == taint["key"]:
                return True
        elif tol.get("key") == taint["key"] and tol.get("value", "") == taint.get("value", ""):
            return True
    return False


def misfits(pod: dict, node: dict, used: dict[str, Fraction]) -> list[str]:
    """Why the pod cannot go on the node (empty when it can)."""
    spec = pod.get("spec") or {}
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in HARD_EFFECTS and not _tolerated(
            taint, spec.get("tolerations") or []
        ):
            return [f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"]
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return [SELECTOR_MISMATCH]
    free = {k: quantity.parse(v) for k, v in node["status"]["allocatable"].items()}
    reasons = []
    for key, wanted in sorted(pod_requests(pod).items()):
        if wanted > 0 and used.get(key, Fraction(0)) + wanted > free.get(key, Fraction(0)):
            reasons.append("Too many pods" if key == "pods" else f"Insufficient {key}")
    return reasons


def node_usage(cluster) -> dict[str, dict[str, Fraction]]:
    """Requests of the live pods bound to each node."""
    used: dict[str, dict[str, Fraction]] = {}
    for pod in cluster.items("pods"):
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in TERMINAL:
            bucket = used.setdefault(node, {})
            for key, value in pod_requests(pod).items():
                bucket[key] = bucket.get(key, Fraction(0)) + value
    return used


def fit_error(total: int, reasons: Counter) -> str:
    if total == 0:
        return "no nodes available to schedule pods"
    parts = sorted(f"{count} {reason}" for reason, count in reasons.items())
    return f"0/{total} nodes are available: {', '.join(parts)}."


def schedule(cluster, now: float, latency: float) -> None:
    """Bind every unbound Pending pod that fits somewhere; mark the others Unschedulable."""
    nodes = sorted(cluster.items("nodes"), key=lambda n: n["metadata"]["name"])
    used = node_usage(cluster)
    for pod in cluster.items("pods"):
        if (pod.get("spec") or {}).get("nodeName") or pod["status"].get("phase") != "Pending":
            continue
        reasons: Counter = Counter()
        for node in nodes:
            why = misfits(pod, node, used.get(node["metadata"]["name"], {}))
            if not why:
                _bind(cluster, pod, node, now, latency)
                bucket = used.setdefault(node["metadata"]["name"], {})
                for key, value in pod_requests(pod).items():
                    bucket[key] = bucket.get(key, Fraction(0)) + value
                break
            reasons.update(set(why))
        else:
            _unschedulable(cluster, pod, fit_error(len(nodes), reasons), now)


def _bind(cluster, pod: dict, node: dict, now: float, latency: float) -> None:
    bound = copy.deepcopy(pod)
    bound["spec"]["nodeName"] = node["metadata"]["name"]
    host = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    containers = bound["spec"]["containers"]
    bound["status"].update(
        hostIP=host,
        startTime=timestamp(now),
        conditions=[
            _condition("PodScheduled", "True", now),
            _condition("Initialized", "True", now),
            _condition("Ready", "False", now, "ContainersNotReady"),
            _condition("ContainersReady", "False", now, "ContainersNotReady"),
        ],
        containerStatuses=[_waiting(c) for c in containers],
    )
    cluster.ready_at[pod["metadata"]["uid"]] = now + latency
    cluster.save("pods", bound)


def _unschedulable(cluster, pod: dict, message: str, now: float) -> None:
    condition = _condition("PodScheduled", "False", now, "Unschedulable", message)
    current = (pod["status"].get("conditions") or [None])[0]
    if current and current.get("message") == message:
        return
    pending = copy.deepcopy(pod)
    pending["status"]["conditions"] = [condition]
    cluster.save("pods", pending)
    cluster.record_event(pod, "FailedScheduling", message, "default-scheduler", now)


def start_containers(cluster, now: float) -> None:
    """Bound pods whose start-up time has passed are Running and Ready."""
    for pod in cluster.items("pods"):
        status = pod["status"]
        if status.get("phase") != "Pending" or not (pod.get("spec") or {}).get("nodeName"):
            continue
        if cluster.ready_at.get(pod["metadata"]["uid"], now) > now:
            continue
        running = copy.deepcopy(pod)
        running["status"]["phase"] = "Running"
        running["status"]["podIP"] = cluster.allocate_pod_ip()
        running["status"]["conditions"] = [
            _condition(kind, "True", now)
            for kind in ("PodScheduled", "Initialized", "Ready", "ContainersReady")
        ]
        running["status"]["containerStatuses"] = [
            _running(c, now) for c in running["spec"]["containers"]
        ]
        cluster.save("pods", running)


def unbind(cluster, pod: dict) -> None:
    """Back to Pending and unscheduled (its node went away)."""
    pending = copy.deepcopy(pod)
    pending["spec"].pop("nodeName", None)
    pending["status"] = {"phase": "Pending", "qosClass": pod["status"].get("qosClass")}
    cluster.ready_at.pop(pod["metadata"]["uid"], None)
    cluster.save("pods", pending)


def _condition(kind: str, status: str, now: float, reason: str = "", message: str = "") -> dict:
    found = {"type": kind, "status": status, "lastProbeTime": None}
    found["lastTransitionTime"] = timestamp(now)
    if reason:
        found["reason"] = reason
    if message:
        found["message"] = message
    return found


def _waiting(container: dict) -> dict:
    return {
        "name": container["name"],
        "image": container["image"],
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 0,
        "state": {"waiting": {"reason": "ContainerCreating"}},
    }


def _running(container: dict, now: float) -> dict:
    return {
        "name": container["name"],
        "image": container["image"],
        "imageID": f"{container['image']}@sha256:{'0' * 64}",
        "containerID": f"containerd://{'1' * 64}",
        "ready": True,
        "started": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": timestamp(now)}},
    }
