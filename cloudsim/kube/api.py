"""HTTP verbs of the simulated Kubernetes API server, under a cluster's server_path.

Paths after the prefix are the real API's (/api/v1/..., /apis/<group>/<version>/...,
/version). Every request must carry ``Authorization: Bearer <anything>``, which makes it the
cluster's admin unless Impersonate-User/Impersonate-Group headers name someone else, and
RBAC must allow it (cloudsim.kube.rbac); every answer that is not an object, a list or a log is
a Status body (store.KubeError). Controllers and the scheduler run before each request is
answered (Cluster.reconcile), as Cloud.advance does for ARM.

Pods' exec, attach and portforward subresources are authorized and then, as the API server
answers a request that is no connection upgrade, refused with 400 "Upgrade request required"
(the emulator streams nothing); pods/log answers an empty text/plain log.
SelfSubjectAccessReview (POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews,
spec.resourceAttributes) says whether the caller may do something.
"""

import copy
import json
import logging
import time
import uuid
from dataclasses import dataclass

from ..protocol import Request, Response
from . import admission, patch, rbac, selectors, workloads
from .cluster import GENERATION_KINDS, PREPARE, STATUS_KINDS, Cluster, update_errors
from .nodes import KUBELET_VERSION
from .store import (
    RESOURCES,
    SYSTEM_NAMESPACES,
    KubeError,
    Resource,
    bad_request,
    conflict,
    details,
    forbidden,
    invalid,
    not_found,
    short_hash,
    timestamp,
)

log = logging.getLogger("cloudsim")
RETURNS_OBJECT = frozenset({"pods", "services", "persistentvolumeclaims", "namespaces"})
NO_ROUTE = KubeError(404, "NotFound", "the server could not find the requested resource", {})
NOT_ALLOWED = KubeError(
    405, "MethodNotAllowed", "the server does not allow this method on the requested resource", {}
)
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
CONNECT = frozenset({"exec", "attach", "portforward"})  # Pod subresources that stream.


VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": KUBELET_VERSION,
    "gitCommit": "5864a4677267e6adeae276ad85882a8714d69d9d",
    "gitTreeState": "clean",
    "buildDate": "2024-10-22T20:28:14Z",
    "goVersion": "go1.22.8",
    "compiler": "gc",
    "platform": "linux/amd64",
}


@dataclass
class Target:
    res: Resource
    namespace: str
    name: str
    sub: str


def handle(cloud, req: Request) -> Response:
    """Answer one request under /k8s/ (never raises)."""
    try:
        if not req.headers.get("authorization", "").lower().startswith("bearer "):
            raise KubeError(401, "Unauthorized", "Unauthorized")
        with cloud.lock:
            cloud.advance()
            found = cloud.kube.find(req.path)
            if found is None:
                raise NO_ROUTE
            cluster, rest = found
            now = time.time()
            cluster.reconcile(now, cloud.latency)
            user = rbac.caller(cluster, req.headers)
            status, body = dispatch(cluster, req, rest, now, cloud.latency, user)
            if isinstance(body, bytes):
                return Response(status, body, {"Content-Type": "text/plain"})
            return Response(status, copy.deepcopy(body))
    except KubeError as err:
        return Response(err.code, err.body())
    except Exception:  # A bug must cost one request, never the server.
        log.exception("unhandled error in the Kubernetes API")
        return Response(500, KubeError(500, "InternalError", "internal error").body())


def parse(rest: str) -> Target:
    segments = [s for s in rest.split("/") if s]
    if segments[:2] == ["api", "v1"]:
        group, version, tail = "", "v1", segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, version, tail = segments[1], segments[2], segments[3:]
    else:
        raise NO_ROUTE
    namespace = ""
    if (
        len(tail) >= 3
        and tail[0] == "namespaces"
        and getattr(RESOURCES.get(tail[2]), "namespaced", False)
    ):
        namespace, tail = tail[1], tail[2:]
    res = RESOURCES.get(tail[0]) if tail else None
    if res is None or (res.group, res.version) != (group, version) or len(tail) > 3:
        raise NO_ROUTE
    if res.namespaced and len(tail) > 1 and not namespace:
        raise NO_ROUTE
    name, sub = (tail + ["", ""])[1:3]
    return Target(res, namespace, name, sub)


def _body(req: Request):
    try:
        return json.loads(req.body) if req.body.strip() else {}
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"the body of the request could not be decoded: {exc}") from None


def dispatch(
    cluster: Cluster,
    req: Request,
    rest: str,
    now: float,
    latency: float,
    user: rbac.UserInfo = rbac.ADMIN,
):
    if rest.strip("/") == "version":
        return 200, VERSION
    if rest.rstrip("/") == ACCESS_REVIEWS:
        return _access_review(cluster, req, user)
    target = parse(rest)
    watch = req.query.get("watch") in ("true", "1")
    rbac.check(cluster, user, _attributes(req, target, watch))
    if watch:
        raise bad_request("watch is not supported by the emulator; list with resourceVersion")
    verb = (req.method, bool(target.name), target.sub)
    if target.res.plural == "pods" and target.name and target.sub in (*CONNECT, "log"):
        return _pod_subresource(cluster, req, target)
    if target.sub == "scale" and target.res.plural in GENERATION_KINDS:
        return _scale(cluster, req, target, now)
    if target.sub:
        raise NO_ROUTE
    if target.res.plural == "nodes" and req.method != "GET":
        raise NOT_ALLOWED
    actions = {
        ("GET", False, ""): lambda: _list(cluster, req, target),
        ("POST", False, ""): lambda: _create(cluster, req, target, now),
        ("GET", True, ""): lambda: (200, _get(cluster, target)),
        ("PUT", True, ""): lambda: (200, _replace(cluster, target, _body(req))),
        ("PATCH", True, ""): lambda: _patch(cluster, req, target),
        ("DELETE", True, ""): lambda: _delete(cluster, req, target, now, latency),
    }
    action = actions.get(verb)
    if action is None:
        raise NOT_ALLOWED
    return action()


def _attributes(req: Request, target: Target, watch: bool) -> rbac.Attributes:
    """The request as RBAC sees it; a namespace's own name is its namespace (RequestInfo)."""
    res = target.res
    namespace = target.name if res.plural == "namespaces" else target.namespace
    return rbac.Attributes(
        verb=rbac.verb_of(req.method, bool(target.name), watch),
        group=res.group,
        resource=res.plural,
        subresource=target.sub,
        namespace=namespace,
        name=target.name,
    )


def _access_review(cluster: Cluster, req: Request, user: rbac.UserInfo):
    if req.method != "POST":
        raise NOT_ALLOWED
    attrs = rbac.Attributes("create", "authorization.k8s.io", "selfsubjectaccessreviews")
    rbac.check(cluster, user, attrs)
    body = _body(req)
    spec = body.get("spec") if isinstance(body, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("resourceAttributes"), dict):
        why = (
            "spec.resourceAttributes: Required value: the emulator answers resourceAttributes "
            "only (one of nonResourceAttributes or resourceAttributes must be specified)"
        )
        message = f'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: {why}'
        raise KubeError(422, "Invalid", message, {"group": "authorization.k8s.io"})
    return 201, rbac.access_review(cluster, user, body)


def _pod_subresource(cluster: Cluster, req: Request, target: Target):
    """exec/attach/portforward: 400 "Upgrade request required" once authorized (no stream);
    log: an empty text/plain log of a started container."""
    pod = _get(cluster, target)
    if target.sub == "log":
        if req.method != "GET":
            raise NOT_ALLOWED
        container = req.query.get("container") or pod["spec"]["containers"][0]["name"]
        if pod["status"].get("phase") == "Pending":
            raise bad_request(
                f'container "{container}" in pod "{target.name}" is waiting to start: '
                "ContainerCreating"
            )
        return 200, b""
    if req.method not in ("GET", "POST"):
        raise NOT_ALLOWED
    if not pod["spec"].get("nodeName"):
        raise bad_request(f"pod {target.name} does not have a host assigned")
    raise bad_request("Upgrade request required")


def _get(cluster: Cluster, target: Target) -> dict:
    obj = cluster.get(target.res.plural, target.namespace, target.name)
    if obj is None:
        raise not_found(target.res, target.name)
    return obj


def _list(cluster: Cluster, req: Request, target: Target):
    labels = selectors.label_matcher(req.query.get("labelselector", ""))
    fields = selectors.field_matcher(target.res.plural, req.query.get("fieldselector", ""))
    items = [
        {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        for obj in cluster.items(target.res.plural, target.namespace or None)
        if labels(obj["metadata"].get("labels")) and fields(obj)
    ]
    body = {
        "kind": f"{target.res.kind}List",
        "apiVersion": target.res.api_version,
        "metadata": {"resourceVersion": str(cluster.rv)},
        "items": items,
    }
    return 200, body


def _check_kind(res: Resource, body) -> dict:
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    if body.get("kind") not in (None, res.kind):
        raise bad_request(f"the kind of the body ({body.get('kind')}) is not {res.kind}")
    body.setdefault("metadata", {})
    if not isinstance(body["metadata"], dict):
        raise bad_request("metadata must be an object")
    return body


def _create(cluster: Cluster, req: Request, target: Target, now: float):
    body = _check_kind(target.res, _body(req))
    meta = body["metadata"]
    if target.res.namespaced:
        if meta.get("namespace") not in (None, "", target.namespace):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        meta["namespace"] = target.namespace
    if not meta.get("name"):
        if not meta.get("generateName"):
            raise invalid(
                target.res, "", "metadata.name", "Required value: name or generateName is required"
            )
        meta["name"] = meta["generateName"] + short_hash(str(uuid.uuid4()), 5)
    if target.res.plural == "nodes":
        raise NOT_ALLOWED
    return 201, cluster.create(target.res.plural, body, now)


def _replace(cluster: Cluster, target: Target, body) -> dict:
    """PUT semantics: the whole object, a stale resourceVersion is a 409 Conflict."""
    res, current = target.res, _get(cluster, target)
    body = _check_kind(res, copy.deepcopy(body))
    meta, old = body["metadata"], current["metadata"]
    if meta.get("name", target.name) != target.name:
        raise bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL "
            f"({target.name})"
        )
    if meta.get("resourceVersion") not in (None, "", old["resourceVersion"]):
        raise conflict(res, target.name)
    for field in (
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "generation",
    ):
        if field in old:
            meta[field] = old[field]
    body["apiVersion"], body["kind"] = res.api_version, res.kind
    if res.plural in STATUS_KINDS:
        body["status"] = current.get("status")
    admission.validate_meta(res.plural, body)
    _keep_immutable(cluster, res, current, body)
    if res.plural in GENERATION_KINDS and body.get("spec") != current.get("spec"):
        meta["generation"] = old.get("generation", 1) + 1
    cluster.save(res.plural, body)
    return body


def _keep_immutable(cluster: Cluster, res: Resource, current: dict, body: dict) -> None:
    plural, spec, old_spec = res.plural, body.setdefault("spec", {}), current.get("spec") or {}
    if plural == "pods" and spec != old_spec:
        why = (
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
            "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
            "(only additions to existing tolerations) or `spec.terminationGracePeriodSeconds`"
        )
        raise invalid(res, current["metadata"]["name"], "spec", why)
    error = update_errors(plural, current, body)
    if error is not None:
        raise error
    if plural == "services":
        for field in ("clusterIP", "clusterIPs", "type", "sessionAffinity"):
            spec.setdefault(field, old_spec.get(field))
    elif plural == "namespaces":
        body["spec"] = old_spec
        body["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = current[
            "metadata"
        ]["name"]
    elif plural == "persistentvolumeclaims":
        for field in ("volumeName", "storageClassName", "volumeMode", "accessModes"):
            spec.setdefault(field, old_spec.get(field))
    elif plural == "secrets":
        admission.encode_string_data(body)
    elif plural == "limitranges":
        admission.default_limit_range(body)
    elif plural == "resourcequotas":
        body["spec"] = spec
        PREPARE["resourcequotas"](cluster, body, 0)
    elif plural in GENERATION_KINDS:
        spec.setdefault("replicas", 1)
        workloads.check_spec(res, current["metadata"]["name"], spec)


def _patch(cluster: Cluster, req: Request, target: Target):
    current = _get(cluster, target)
    patched = patch.apply(current, _body(req), req.headers.get("content-type", ""))
    return 200, _replace(cluster, target, patched)


def _delete_options(req: Request) -> str:
    body = _body(req) if req.body else {}
    policy = (body.get("propagationPolicy") if isinstance(body, dict) else None) or ""
    return req.query.get("propagationpolicy") or policy


def _delete(cluster: Cluster, req: Request, target: Target, now: float, latency: float):
    res, obj = target.res, copy.deepcopy(_get(cluster, target))
    meta = obj["metadata"]
    if res.plural == "namespaces":
        return 200, _delete_namespace(cluster, res, obj, now, latency)
    if res.plural == "persistentvolumeclaims" and cluster.claim_in_use(
        meta["namespace"], meta["name"]
    ):
        meta.setdefault("deletionTimestamp", timestamp(now))
        meta["finalizers"] = ["kubernetes.io/pvc-protection"]
        cluster.save(res.plural, obj)  # Goes once no pod mounts it (kubernetes.io/pvc-protection).
        return 200, obj
    if res.plural in GENERATION_KINDS and _delete_options(req) == "Orphan":
        for pod in workloads.owned_pods(cluster, obj):
            freed = copy.deepcopy(pod)
            freed["metadata"].pop("ownerReferences", None)
            cluster.save("pods", freed)
    cluster.remove(res.plural, target.namespace, target.name)
    cluster.ready_at.pop(meta["uid"], None)
    if res.plural in RETURNS_OBJECT:
        return 200, obj
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    status["details"] = details(res, target.name, uid=meta["uid"])
    return 200, status


def _delete_namespace(cluster: Cluster, res: Resource, obj: dict, now: float, latency: float):
    name = obj["metadata"]["name"]
    if name in SYSTEM_NAMESPACES:
        raise forbidden(res, name, "this namespace may not be deleted")
    if obj["status"].get("phase") != "Terminating":
        obj["metadata"]["deletionTimestamp"] = timestamp(now)
        obj["status"] = {"phase": "Terminating"}
        cluster.save("namespaces", obj)
        cluster.finalize_at[name] = now + latency
    return obj


def _scale_doc(cluster: Cluster, obj: dict) -> dict:
    meta = obj["metadata"]
    match = (obj["spec"].get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
        },
        "spec": {"replicas": obj["spec"].get("replicas", 1)},
        "status": {
            "replicas": (obj.get("status") or {}).get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in sorted(match.items())),
        },
    }


def _scale(cluster: Cluster, req: Request, target: Target, now: float):
    """The /scale subresource: GET, PUT (resourceVersion checked) and PATCH."""
    obj = copy.deepcopy(_get(cluster, target))
    scale = _scale_doc(cluster, obj)
    if req.method == "GET":
        return 200, scale
    if req.method == "PUT":
        wanted = _body(req)
    elif req.method == "PATCH":
        wanted = patch.apply(scale, _body(req), req.headers.get("content-type", ""))
    else:
        raise NOT_ALLOWED
    rv = ((wanted or {}).get("metadata") or {}).get("resourceVersion")
    if rv not in (None, "", obj["metadata"]["resourceVersion"]):
        raise conflict(target.res, target.name)
    replicas = ((wanted or {}).get("spec") or {}).get("replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
        raise invalid(
            target.res,
            target.name,
            "spec.replicas",
            f"Invalid value: {replicas!r}: must be greater than or equal to 0",
        )
    if replicas != obj["spec"].get("replicas"):
        obj["spec"]["replicas"] = replicas
        obj["metadata"]["generation"] = obj["metadata"].get("generation", 1) + 1
        cluster.save(target.res.plural, obj)
    return 200, _scale_doc(cluster, obj)


def split_prefix(path: str) -> tuple[str, str]:
    """("/k8s/<sub>/<rg>/<cluster>", rest) of a request path (lower-cased prefix)."""
    parts = path.split("/")
    return "/".join(parts[:5]).lower(), "/" + "/".join(parts[5:])
