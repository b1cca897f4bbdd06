"""Deployment and StatefulSet controllers: make the pods match spec.replicas.

Simplifications, none visible to a caller polling pods and replicas: a Deployment owns its pods
directly (no ReplicaSet objects are served) and a template change replaces the old pods at once.
A pod the API server refuses (ResourceQuota) is a FailedCreate event on the owner, retried on
every later request, as the controllers' work queues do.
"""

import copy
import json

from .store import RESOURCES, KubeError, invalid, short_hash

ORDINAL_LABEL = "apps.kubernetes.io/pod-index"


def prepare(cluster, obj: dict, now: float) -> None:
    """Defaults and the checks the API server makes on a new Deployment or StatefulSet."""
    plural = "deployments" if obj["kind"] == "Deployment" else "statefulsets"
    res, name = RESOURCES[plural], obj["metadata"]["name"]
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    if plural == "statefulsets":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    else:
        spec.setdefault("strategy", {"type": "RollingUpdate"})
        spec.setdefault("progressDeadlineSeconds", 600)
    check_spec(res, name, spec)
    obj["status"] = {"replicas": 0} if plural == "statefulsets" else {}


def check_spec(res, name: str, spec: dict) -> None:
    match = (spec.get("selector") or {}).get("matchLabels") or {}
    if not match:
        raise invalid(res, name, "spec.selector", "Required value")
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in match.items()):
        shown = ", ".join(f'"{k}":"{v}"' for k, v in sorted(labels.items()))
        why = (
            f"Invalid value: map[string]string{{{shown}}}: "
            "`selector` does not match template `labels`"
        )
        raise invalid(res, name, "spec.template.metadata.labels", why)
    if not (template.get("spec") or {}).get("containers"):
        raise invalid(res, name, "spec.template.spec.containers", "Required value")
    if not isinstance(spec.get("replicas"), int) or spec["replicas"] < 0:
        raise invalid(
            res, name, "spec.replicas", "Invalid value: must be greater than or equal to 0"
        )


def template_hash(owner: dict) -> str:
    text = json.dumps(owner["spec"].get("template") or {}, sort_keys=True)
    return short_hash(text, 10)


def owned_pods(cluster, owner: dict) -> list[dict]:
    uid, namespace = owner["metadata"]["uid"], owner["metadata"]["namespace"]
    return [
        pod
        for pod in cluster.items("pods", namespace)
        if any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences") or [])
    ]


def is_ready(pod: dict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _new_pod(owner: dict, name: str, labels: dict) -> dict:
    template = copy.deepcopy(owner["spec"].get("template") or {})
    meta = template.get("metadata") or {}
    reference = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    metadata = {
        "name": name,
        "namespace": owner["metadata"]["namespace"],
        "labels": {**(meta.get("labels") or {}), **labels},
        "annotations": dict(meta.get("annotations") or {}),
        "ownerReferences": [reference],
    }
    return {"metadata": metadata, "spec": template.get("spec") or {}}


def _try_create(cluster, owner: dict, pod: dict, now: float) -> bool:
    name, owner_name = pod["metadata"]["name"], owner["metadata"]["name"]
    try:
        cluster.create("pods", pod, now)
    except KubeError as err:
        if owner["kind"] == "StatefulSet":
            text = f"create Pod {name} in StatefulSet {owner_name} failed error: {err.message}"
            component = "statefulset-controller"
        else:
            text, component = f"Error creating: {err.message}", "replicaset-controller"
        cluster.failures[owner["metadata"]["uid"]] = text
        cluster.record_event(owner, "FailedCreate", text, component, now)
        return False
    cluster.failures.pop(owner["metadata"]["uid"], None)
    return True


def _delete(cluster, pod: dict) -> None:
    cluster.remove("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
    cluster.ready_at.pop(pod["metadata"]["uid"], None)


def sync_deployment(cluster, deploy: dict, now: float) -> None:
    digest, uid = template_hash(deploy), deploy["metadata"]["uid"]
    pods = owned_pods(cluster, deploy)
    for pod in [p for p in pods if p["metadata"]["labels"].get("pod-template-hash") != digest]:
        _delete(cluster, pod)
    pods = [p for p in pods if p["metadata"]["labels"].get("pod-template-hash") == digest]
    wanted = deploy["spec"].get("replicas", 1)
    # The ReplicaSet controller removes unscheduled, then unready, then newest pods first.
    pods.sort(key=lambda p: (bool(p["spec"].get("nodeName")), is_ready(p), -_rv(p)))
    for pod in pods[: max(len(pods) - wanted, 0)]:
        _delete(cluster, pod)
    for _ in range(wanted - len(pods)):
        made = cluster.created.get(uid, 0)
        suffix = short_hash(f"{uid}/{made}", 5)
        name = f"{deploy['metadata']['name']}-{digest}-{suffix}"
        pod = _new_pod(deploy, name, {"pod-template-hash": digest})
        if not _try_create(cluster, deploy, pod, now):
            return
        cluster.created[uid] = made + 1


def sync_statefulset(cluster, sts: dict, now: float) -> None:
    name, digest = sts["metadata"]["name"], template_hash(sts)
    revision = f"{name}-{digest}"
    wanted = sts["spec"].get("replicas", 1)
    ordered = sts["spec"].get("podManagementPolicy", "OrderedReady") == "OrderedReady"
    pods = {
        int(p["metadata"]["labels"].get(ORDINAL_LABEL, -1)): p for p in owned_pods(cluster, sts)
    }
    for ordinal in sorted(pods, reverse=True):
        stale = pods[ordinal]["metadata"]["labels"].get("controller-revision-hash") != revision
        if ordinal >= wanted or stale:
            _delete(cluster, pods.pop(ordinal))
    for ordinal in range(wanted):
        pod = pods.get(ordinal)
        if pod is None:
            labels = {
                "controller-revision-hash": revision,
                "statefulset.kubernetes.io/pod-name": f"{name}-{ordinal}",
                ORDINAL_LABEL: str(ordinal),
            }
            pod = _new_pod(sts, f"{name}-{ordinal}", labels)
            if not _try_create(cluster, sts, pod, now):
                return
        if ordered and not is_ready(
            cluster.get("pods", sts["metadata"]["namespace"], pod["metadata"]["name"])
        ):
            return  # OrderedReady: the next ordinal waits for this one to be Running and Ready.


def sync_all(cluster, now: float) -> None:
    for deploy in cluster.items("deployments"):
        if not deploy["metadata"].get("deletionTimestamp"):
            sync_deployment(cluster, deploy, now)
    for sts in cluster.items("statefulsets"):
        if not sts["metadata"].get("deletionTimestamp"):
            sync_statefulset(cluster, sts, now)


def update_statuses(cluster) -> None:
    for plural in ("deployments", "statefulsets"):
        for owner in cluster.items(plural):
            pods = owned_pods(cluster, owner)
            ready = sum(1 for p in pods if is_ready(p))
            counts = {"replicas": len(pods), "readyReplicas": ready, "availableReplicas": ready}
            status = {"observedGeneration": owner["metadata"].get("generation", 1)}
            if plural == "statefulsets":
                revision = f"{owner['metadata']['name']}-{template_hash(owner)}"
                counts.update(currentReplicas=len(pods), updatedReplicas=len(pods))
                status.update(currentRevision=revision, updateRevision=revision, collisionCount=0)
                status["replicas"] = len(pods)
            else:
                counts.update(updatedReplicas=len(pods))
                missing = owner["spec"].get("replicas", 1) - ready
                if missing > 0:
                    counts["unavailableReplicas"] = missing
                status["conditions"] = _deployment_conditions(cluster, owner, missing)
            status.update({k: v for k, v in counts.items() if v})
            updated = copy.deepcopy(owner)
            updated["status"] = status
            cluster.save(plural, updated)


def _deployment_conditions(cluster, deploy: dict, missing: int) -> list[dict]:
    available = {"type": "Available", "status": "True" if missing <= 0 else "False"}
    available["reason"] = (
        "MinimumReplicasAvailable" if missing <= 0 else "MinimumReplicasUnavailable"
    )
    conditions = [available]
    failure = cluster.failures.get(deploy["metadata"]["uid"])
    if failure:
        conditions.append(
            {
                "type": "ReplicaFailure",
                "status": "True",
                "reason": "FailedCreate",
                "message": failure,
            }
        )
    return conditions


def _rv(obj: dict) -> int:
    return int(obj["metadata"]["resourceVersion"])
