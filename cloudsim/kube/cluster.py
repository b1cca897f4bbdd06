"""One simulated cluster: its store, nodes from the agent pools, creation rules, and the
controllers that run lazily before every request (reconcile)."""

import copy
import uuid

from . import admission, nodes, quantity, rbac, scheduler, workloads
from .store import (
    RESOURCES,
    SYSTEM_NAMESPACES,
    KubeError,
    Store,
    already_exists,
    forbidden,
    invalid,
    not_found,
    timestamp,
)

STATUS_KINDS = frozenset(
    {"pods", "namespaces", "services", "persistentvolumeclaims", "resourcequotas"}
    | {"deployments", "statefulsets", "nodes"}
)  # A PUT or PATCH of the object itself leaves their status alone.
GENERATION_KINDS = frozenset({"deployments", "statefulsets"})


class Cluster(Store):
    """The API state of one managed cluster. `prefix` is its server_path."""

    def __init__(self, key: str, name: str, prefix: str, now: float):
        super().__init__()
        self.key, self.name, self.prefix = key, name, prefix
        self.pools: dict = {}  # Pool name -> PoolShape.
        self.finalize_at: dict[str, float] = {}  # Terminating namespace -> when it goes.
        self.ready_at: dict[str, float] = {}  # Pod uid -> when its containers are ready.
        self.created: dict[str, int] = {}  # Controller uid -> pods it has made (for names).
        self.failures: dict[str, str] = {}  # Controller uid -> its last FailedCreate message.
        self.next_ip = 11  # Service IPs from 10.0.0.0/16 (AKS's default service CIDR).
        self.next_pod_ip = 4
        for name_ in SYSTEM_NAMESPACES:
            self.insert("namespaces", _namespace(name_), now)
        for plural, obj in rbac.bootstrap():  # cluster-admin, admin, edit, view...
            self.insert(plural, obj, now)
        rbac.aggregate(self)

    # --- nodes --------------------------------------------------------------------------

    def sync_pool(self, shape, now: float) -> None:
        """Create, reshape or shrink the pool's nodes to `shape`."""
        self.pools[shape.name] = shape
        wanted = {nodes.node_name(self.key, shape.name, i): i for i in range(shape.count)}
        for node in self._pool_nodes(shape.name):
            if node["metadata"]["name"] not in wanted:
                self._drop_node(node, now)
        for name, index in wanted.items():
            fresh = nodes.node_object(self.key, shape, index)
            current = self.get("nodes", "", name)
            if current is None:
                self.insert("nodes", fresh, now)
            else:
                meta = current["metadata"]
                fresh["metadata"].update({k: meta[k] for k in ("uid", "creationTimestamp")})
                self.save("nodes", {**fresh, "apiVersion": "v1", "kind": "Node"})

    def drop_pool(self, pool_name: str, now: float) -> None:
        self.pools.pop(pool_name, None)
        for node in self._pool_nodes(pool_name):
            self._drop_node(node, now)

    def _pool_nodes(self, pool_name: str) -> list[dict]:
        return [n for n in self.items("nodes") if n["metadata"]["labels"]["agentpool"] == pool_name]

    def _drop_node(self, node: dict, now: float) -> None:
        """The node goes; its pods go back to Pending to be scheduled elsewhere."""
        self.remove("nodes", "", node["metadata"]["name"])
        for pod in self.items("pods"):
            if (pod.get("spec") or {}).get("nodeName") == node["metadata"]["name"]:
                scheduler.unbind(self, pod)

    # --- creation ---------------------------------------------------------------------------

    def create(self, plural: str, obj: dict, now: float) -> dict:
        """Validate, default, admit and store a new object (KubeError when refused)."""
        res, meta = RESOURCES[plural], obj.setdefault("metadata", {})
        name = meta.get("name") or ""
        if res.namespaced:
            self.check_namespace_open(plural, meta.get("namespace", ""), name)
        else:
            meta.pop("namespace", None)
        admission.validate_meta(plural, obj)
        if self.get(plural, meta.get("namespace", ""), name) is not None:
            raise already_exists(res, name)
        for field in ("resourceVersion", "deletionTimestamp", "creationTimestamp"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        PREPARE.get(plural, _no_prepare)(self, obj, now)
        if plural in GENERATION_KINDS:
            meta["generation"] = 1
        admission.admit_quota(self, plural, obj)
        return self.insert(plural, obj, now)

    def check_namespace_open(self, plural: str, namespace: str, name: str) -> None:
        ns = self.get("namespaces", "", namespace)
        if ns is None:
            raise not_found(RESOURCES["namespaces"], namespace)
        if ns["status"].get("phase") == "Terminating":
            why = (
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated"
            )
            causes = [
                {"reason": "NamespaceTerminating", "message": why, "field": "metadata.namespace"}
            ]
            raise forbidden(RESOURCES[plural], name, why, causes=causes)

    # --- events -----------------------------------------------------------------------------

    def record_event(self, obj: dict, reason: str, message: str, component: str, now: float):
        """A Warning event about `obj`; the same reason and message again is no new write."""
        meta, namespace = obj["metadata"], obj["metadata"].get("namespace") or "default"
        for event in self.items("events", namespace):
            same = event["involvedObject"].get("uid") == meta["uid"] and event["reason"] == reason
            if same and event["message"] == message:
                return
            if same:
                updated = copy.deepcopy(event)
                updated.update(message=message, count=event["count"] + 1)
                updated["lastTimestamp"] = timestamp(now)
                self.save("events", updated)
                return
        name = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
        involved = {k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion")}
        involved.update(kind=obj["kind"], apiVersion=obj["apiVersion"])
        event = {
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": reason,
            "message": message,
            "type": "Warning",
            "count": 1,
            "source": {"component": component},
            "firstTimestamp": timestamp(now),
            "lastTimestamp": timestamp(now),
        }
        self.insert("events", event, now)

    # --- controllers ------------------------------------------------------------------------

    def reconcile(self, now: float, latency: float) -> None:
        """Run the controllers once: namespaces, garbage collection, ClusterRole aggregation,
        workloads, scheduler, kubelet, statuses. Idempotent when nothing changed (no writes)."""
        self._finish_namespaces(now)
        self._collect_garbage()
        rbac.aggregate(self)
        workloads.sync_all(self, now)
        scheduler.schedule(self, now, latency)
        scheduler.start_containers(self, now)
        workloads.update_statuses(self)
        for quota in self.items("resourcequotas"):
            updated = copy.deepcopy(quota)
            updated["status"] = admission.quota_status(self, quota)
            self.save("resourcequotas", updated)

    def _finish_namespaces(self, now: float) -> None:
        for name, when in list(self.finalize_at.items()):
            if when > now:
                continue
            for plural, res in RESOURCES.items():
                if res.namespaced:
                    for obj in self.items(plural, name):
                        self.remove(plural, name, obj["metadata"]["name"])
            self.remove("namespaces", "", name)
            del self.finalize_at[name]

    def _collect_garbage(self) -> None:
        """Pods whose controller is gone; PVCs being deleted once no pod mounts them."""
        uids = {o["metadata"]["uid"] for p in GENERATION_KINDS for o in self.items(p)}
        for pod in self.items("pods"):
            owners = pod["metadata"].get("ownerReferences") or []
            if owners and not any(ref.get("uid") in uids for ref in owners):
                self.remove("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                self.ready_at.pop(pod["metadata"]["uid"], None)
        for pvc in self.items("persistentvolumeclaims"):
            meta = pvc["metadata"]
            if meta.get("deletionTimestamp") and not self.claim_in_use(
                meta["namespace"], meta["name"]
            ):
                self.remove("persistentvolumeclaims", meta["namespace"], meta["name"])

    def remove(self, plural: str, namespace: str, name: str) -> dict | None:
        obj = super().remove(plural, namespace, name)
        if obj is not None and plural == "persistentvolumeclaims":
            self._release_volume(obj)
        return obj

    def _release_volume(self, claim: dict) -> None:
        """A claim gone: its bound volume is Released (Retain: it and what it points at stay,
        and no new claim binds it until someone deletes or edits it) or deleted (Delete)."""
        volume = self.get("persistentvolumes", "", (claim.get("spec") or {}).get("volumeName"))
        ref = ((volume or {}).get("spec") or {}).get("claimRef") or {}
        meta = claim["metadata"]
        if volume is None or (ref.get("namespace"), ref.get("name")) != (
            meta.get("namespace"),
            meta["name"],
        ):
            return
        if volume["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
            self.remove("persistentvolumes", "", volume["metadata"]["name"])
            return
        released = copy.deepcopy(volume)
        released["status"] = {"phase": "Released"}
        self.save("persistentvolumes", released)

    def claim_in_use(self, namespace: str, claim: str) -> bool:
        for pod in self.items("pods", namespace):
            for volume in (pod.get("spec") or {}).get("volumes") or []:
                if (volume.get("persistentVolumeClaim") or {}).get("claimName") == claim:
                    return True
        return False

    def allocate_ip(self) -> str:
        number, self.next_ip = self.next_ip, self.next_ip + 1
        return f"10.0.{number // 250}.{number % 250 + 1}"

    def allocate_pod_ip(self) -> str:
        number, self.next_pod_ip = self.next_pod_ip, self.next_pod_ip + 1
        return f"10.244.{number // 250}.{number % 250 + 1}"


def _namespace(name: str) -> dict:
    labels = {"kubernetes.io/metadata.name": name}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _no_prepare(cluster: Cluster, obj: dict, now: float) -> None:
    return None


def _prepare_namespace(cluster: Cluster, obj: dict, now: float) -> None:
    name = obj["metadata"]["name"]
    labels = obj["metadata"].setdefault("labels", {})
    labels["kubernetes.io/metadata.name"] = name
    obj["spec"], obj["status"] = {"finalizers": ["kubernetes"]}, {"phase": "Active"}


def _prepare_pod(cluster: Cluster, obj: dict, now: float) -> None:
    admission.default_pod(cluster, obj)
    obj["status"] = {"phase": "Pending", "qosClass": admission.qos_class(obj)}
    if obj["spec"].get("nodeName"):
        obj["status"]["conditions"] = []  # Bound by the client: the scheduler skips it.


def _prepare_service(cluster: Cluster, obj: dict, now: float) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec.get("clusterIP") != "None":
        spec["clusterIP"] = cluster.allocate_ip()
    spec["clusterIPs"] = [spec["clusterIP"]]
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        port.setdefault("targetPort", port.get("port"))
    obj["status"] = {"loadBalancer": {}}


def _prepare_pvc(cluster: Cluster, obj: dict, now: float) -> None:
    res, name = RESOURCES["persistentvolumeclaims"], obj["metadata"]["name"]
    spec = obj.setdefault("spec", {})
    storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if storage is None:
        raise invalid(res, name, "spec.resources[storage]", "Required value")
    try:
        quantity.parse(storage)
    except ValueError as exc:
        raise invalid(res, name, "spec.resources[storage]", str(exc)) from None
    spec.setdefault("storageClassName", "default")  # AKS's default class (Azure Disk CSI).
    spec.setdefault("volumeMode", "Filesystem")
    modes = spec.get("accessModes") or ["ReadWriteOnce"]
    if spec.get("volumeName"):  # Static provisioning: bind to that PersistentVolume.
        _bind_static(cluster, obj, modes)
        return
    spec["volumeName"] = f"pvc-{obj['metadata']['uid']}"
    obj["status"] = {"phase": "Bound", "accessModes": modes, "capacity": {"storage": storage}}


def _bind_static(cluster: Cluster, claim: dict, modes: list) -> None:
    """A claim naming its volume binds to it when the volume is there, free or pre-bound to
    this claim (spec.claimRef); it stays Pending otherwise, as the binder leaves it."""
    meta = claim["metadata"]
    volume = cluster.get("persistentvolumes", "", claim["spec"]["volumeName"])
    ref = ((volume or {}).get("spec") or {}).get("claimRef") or {}
    mine = (ref.get("namespace"), ref.get("name")) in ((meta.get("namespace"), meta["name"]),)
    if volume is None or (ref and not mine) or volume["status"]["phase"] == "Released":
        claim["status"] = {"phase": "Pending"}
        return
    volume["spec"]["claimRef"] = {"namespace": meta.get("namespace"), "name": meta["name"]}
    volume["status"] = {"phase": "Bound"}
    capacity = volume["spec"].get("capacity") or {}
    claim["status"] = {"phase": "Bound", "accessModes": modes, "capacity": capacity}


def _prepare_pv(cluster: Cluster, obj: dict, now: float) -> None:
    res, name = RESOURCES["persistentvolumes"], obj["metadata"]["name"]
    spec = obj.setdefault("spec", {})
    if not (spec.get("capacity") or {}).get("storage"):
        raise invalid(res, name, "spec.capacity", "Required value")
    if not spec.get("accessModes"):
        raise invalid(res, name, "spec.accessModes", "Required value")
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    obj["status"] = {"phase": "Available"}


def _prepare_quota(cluster: Cluster, obj: dict, now: float) -> None:
    res, name = RESOURCES["resourcequotas"], obj["metadata"]["name"]
    for key, value in ((obj.get("spec") or {}).get("hard") or {}).items():
        try:
            quantity.parse(value)
        except ValueError as exc:
            raise invalid(res, name, f"spec.hard[{key}]", str(exc)) from None
    obj["status"] = admission.quota_status(cluster, obj)


PREPARE = {
    "namespaces": _prepare_namespace,
    "pods": _prepare_pod,
    "services": _prepare_service,
    "persistentvolumeclaims": _prepare_pvc,
    "persistentvolumes": _prepare_pv,
    "resourcequotas": _prepare_quota,
    "limitranges": lambda c, obj, now: admission.default_limit_range(obj),
    "secrets": lambda c, obj, now: admission.encode_string_data(obj),
    "deployments": workloads.prepare,
    "statefulsets": workloads.prepare,
    "rolebindings": lambda c, obj, now: admission.check_role_ref("rolebindings", obj),
    "clusterrolebindings": lambda c, obj, now: admission.check_role_ref("clusterrolebindings", obj),
}


def update_errors(plural: str, current: dict, new: dict) -> KubeError | None:
    """What a replace may not change (immutable fields), as a 422, else None."""
    res, name = RESOURCES[plural], current["metadata"]["name"]
    if plural in ("rolebindings", "clusterrolebindings") and new.get("roleRef") != current.get(
        "roleRef"
    ):
        return invalid(
            res, name, "roleRef", f"Invalid value: {new.get('roleRef')}: cannot change roleRef"
        )
    if plural == "persistentvolumeclaims":
        old_spec, new_spec = current.get("spec") or {}, new.get("spec") or {}
        for field in ("accessModes", "storageClassName", "volumeName"):
            if field in new_spec and new_spec[field] != old_spec.get(field):
                return invalid(
                    res,
                    name,
                    "spec",
                    "Forbidden: spec is immutable after creation except resources.requests",
                )
    return None
