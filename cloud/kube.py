"""Kubernetes adapter for the portal's AKS workspaces: MIG slices and team namespaces.

Built on the official ``kubernetes`` client against an AKS API server (URL + CA from the
cluster's kubeconfig, an Entra ID bearer token). Takes plain values, returns frozen
dataclasses, raises cloud.errors.CloudError for anything the API server refused:
code = the Status reason ("Forbidden", "AlreadyExists", "NotFound", "Conflict", ...),
message = the Status message verbatim (e.g. the ResourceQuota admission's ``pods "x" is
forbidden: exceeded quota: ...``), status = the HTTP status, transient for 429, 5xx and
connection errors. Creates are idempotent: a 409 AlreadyExists on an object this workspace
owns (WORKSPACE_LABEL) is success; one someone else owns is CloudError("AlreadyExists").

A MIG workspace is a one-replica StatefulSet ``<name>`` (pod ``<name>-0``) requesting
``nvidia.com/mig-<profile>: 1``, pinned to its node pool (nodeSelector ``agentpool``,
tolerations of the pool's taints), with PVC ``<name>-home`` on /home, Service ``<name>``
(JupyterLab, port 8888) and Secret ``<name>-agent`` (the telemetry agent's token, handed to
the pod as env PORTAL_AGENT_TOKEN from a secretKeyRef, never in the pod spec). Given the agent's
program, ConfigMap ``<name>-agent-code`` holds it, mounted read-only at AGENT_DIR, and the
container's command starts it in the background before the image's own start command
(docs/agent-protocol.md §1b), so it reads the pod's MIG device.

Kubernetes rights on a slice are its owner's alone: Role and RoleBinding ``<name>-owner`` let
the owner's Entra ID identities (SliceAccess.users) get the pod ``<name>-0``, port-forward to it
and read its log, by resourceNames, and nothing else. The team's group gets nothing in the
slices' namespace: ``edit`` there would read every member's Secret and exec into their pods.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import os
import re
import shlex
import tempfile
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import urllib3
from azure.core.exceptions import AzureError
from kubernetes import client
from kubernetes.client import ApiClient, ApiException

from .clients import LOOPBACK_HOSTS, AzureSettings, _default_credential
from .errors import CloudError, from_azure

AKS_SERVER_SCOPE = "6dae42f8-4368-4678-94ff-3960e28e3630/.default"  # Entra ID AKS server app
MANAGED_BY = "gpu-workspace-portal"  # label app.kubernetes.io/managed-by
WORKSPACE_LABEL = "portal.azure.com/workspace"  # value: the workspace uuid (owner check on 409)
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
INSTANCE_LABEL = "app.kubernetes.io/instance"
REPLICAS_ANNOTATION = "portal.azure.com/replicas-before-stop"
QUOTA_NAME, LIMIT_RANGE_NAME = "portal-quota", "portal-defaults"
ROLE_BINDING_NAME, NETWORK_POLICY_NAME = "team-edit", "deny-other-namespaces"
GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
JUPYTER_PORT = 8888
AGENT_TOKEN_ENV = "PORTAL_AGENT_TOKEN"
AGENT_DIR = "/opt/gpu-portal-agent"  # The ConfigMap's mount: the agent's program, read-only.
AGENT_FILE = "gpu_portal_agent.py"
AGENT_LIB_DIR = "/tmp/gpu-portal-agent-lib"  # pip --target: writable whatever the image's user.
AGENT_EXIT_GONE = 3  # The agent's exit status after a 410: the workspace is gone, no restart.
AGENT_RESTART_SECONDS = 10
DEFAULT_START_COMMAND = ("start-notebook.py",)  # The Jupyter Docker Stacks images' CMD.
TOKEN_MARGIN = 300  # Seconds before expiry an Entra ID token is replaced.
RETRY_STATUSES = (429, 500, 502, 503, 504)
MIG_PROFILE = re.compile(r"^[1-7]g\.[0-9]+gb$")
# Defaults a container without requests gets in a team namespace (the quota counts requests).
DEFAULT_REQUEST = {"cpu": "500m", "memory": "1Gi"}
DEFAULT_LIMIT = {"cpu": "4", "memory": "16Gi"}


# --- client ---------------------------------------------------------------------------------


class _TokenHook:
    """Configuration.refresh_api_key_hook: an Entra ID token for the AKS server app, fetched
    again TOKEN_MARGIN seconds before it expires."""

    def __init__(self, credential: Any):
        self._credential, self._token, self._lock = credential, None, threading.Lock()

    def __call__(self, config: client.Configuration) -> None:
        with self._lock:
            token = self._token
            if token is None or token.expires_on - TOKEN_MARGIN <= time.time():
                with _errors():
                    token = self._token = self._credential.get_token(AKS_SERVER_SCOPE)
            config.api_key["BearerToken"] = token.token


def _ca_file(ca_data: str) -> str:
    """A file holding the kubeconfig's base64 certificate-authority-data (urllib3 wants a
    path), named by its content so every client of one cluster shares it."""
    pem = base64.b64decode(ca_data)
    path = os.path.join(tempfile.gettempdir(), f"portal-aks-ca-{hashlib.sha256(pem).hexdigest()}")
    if not os.path.exists(path):
        with tempfile.NamedTemporaryFile(dir=os.path.dirname(path), delete=False) as handle:
            handle.write(pem)
        os.replace(handle.name, path)
    return path


@functools.lru_cache(maxsize=32)
def kube_api(settings: AzureSettings, server: str, ca_data: str | None) -> ApiClient:
    """The cached ApiClient of one AKS API server.

    server: the kubeconfig's cluster server URL; ca_data: its certificate-authority-data
    (base64 PEM) or None. The bearer token is "emulator" with the emulator credential (loopback
    servers only, as cloud.clients enforces for ARM), else DefaultAzureCredential's token for
    AKS_SERVER_SCOPE, refreshed before expiry. 429 and 5xx answers to reads are retried
    (settings.retry_total, retry_backoff, Retry-After honoured). Raises ValueError for an
    unknown credential mode or the emulator credential on a non-loopback server."""
    config = client.Configuration(host=server.rstrip("/"))
    config.api_key_prefix = {"BearerToken": "Bearer"}
    if settings.credential == "emulator":
        if urlsplit(server).hostname not in LOOPBACK_HOSTS:
            raise ValueError(
                f"credential 'emulator' is only allowed for loopback servers, not {server!r}"
            )
        config.api_key = {"BearerToken": "emulator"}
    elif settings.credential == "default":
        config.api_key = {"BearerToken": ""}
        config.refresh_api_key_hook = _TokenHook(_default_credential())
    else:
        raise ValueError(f"unknown credential mode {settings.credential!r}")
    if ca_data:
        config.ssl_ca_cert = _ca_file(ca_data)
    config.retries = urllib3.Retry(
        total=settings.retry_total,
        backoff_factor=settings.retry_backoff,
        status_forcelist=RETRY_STATUSES,
        respect_retry_after_header=True,
        raise_on_status=False,  # The last answer reaches the caller as an ApiException.
    )
    return ApiClient(config)


# --- errors ---------------------------------------------------------------------------------


def from_kube(exc: ApiException) -> CloudError:
    """CloudError from an ApiException: the Status body's reason and message."""
    status = exc.status or None
    reason, message = exc.reason or "ApiException", str(exc.reason or "")
    try:
        body = json.loads(exc.body or b"{}")
        reason, message = body.get("reason") or reason, body.get("message") or message
    except (ValueError, TypeError, AttributeError):
        pass  # Not a Status body (a proxy's page): the HTTP reason phrase is what there is.
    headers = exc.headers or {}
    retry_after = headers.get("Retry-After")
    transient = status is None or status == 429 or status >= 500
    return CloudError(
        reason,
        message,
        status=status,
        transient=transient,
        retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None,
    )


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    try:
        yield
    except ApiException as exc:
        raise from_kube(exc) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise CloudError(type(exc).__name__, str(exc), transient=True) from exc
    except AzureError as exc:
        raise from_azure(exc) from exc


def _missing(read: Callable[[], Any]) -> bool:
    """True when read() answers 404."""
    try:
        read()
    except ApiException as exc:
        if exc.status == 404:
            return True
        raise
    return False


def _quietly(call: Callable[[], Any]) -> Any:
    """call(), or None when it answers 404."""
    try:
        return call()
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None


def _ensure(
    kind: str,
    name: str,
    create: Callable[[], Any],
    read: Callable[[], Any],
    owned: Callable[[Any], bool],
) -> Any:
    """Create; on 409 AlreadyExists accept the existing object if owned(its labels) and
    return it (None when created)."""
    try:
        create()
        return None
    except ApiException as exc:
        if exc.status != 409:
            raise
    found = read()
    labels = found.metadata.labels or {}
    if owned(labels):
        return found
    workspace = labels.get(WORKSPACE_LABEL)
    owner = f"workspace {workspace}" if workspace else "someone outside the portal"
    message = f"{kind} {name} already exists and belongs to {owner}"
    raise CloudError("AlreadyExists", message, status=409)


def _meta(name: str, labels: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _labels(workspace_id: str, extra: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return {**dict(extra), MANAGED_BY_LABEL: MANAGED_BY, WORKSPACE_LABEL: workspace_id}


# --- MIG workspaces -------------------------------------------------------------------------


@dataclass(frozen=True)
class MigSpec:
    """One MIG-slice workspace. namespace: the team's (created if missing, labelled ours);
    name: "ws-<12 hex>"; mig_profile: "1g.10gb"; tolerations: the pool's taints
    "key=value:Effect"; home_gib: PVC size in GiB; env: plain settings for the telemetry
    agent; agent_token: stored in Secret "<name>-agent"; labels: e.g. team, owner;
    agent_script: the agent's program (agent/gpu_portal_agent.py), "" to run none;
    agent_requirement: a pip requirement installed for it when the image lacks pynvml
    ("nvidia-ml-py==13.615.71"; "" installs nothing); start_command: the image's own start
    command, which the agent's launcher execs (the container's args)."""

    workspace_id: str
    namespace: str
    name: str
    image: str
    mig_profile: str
    pool_name: str
    tolerations: tuple[str, ...]
    home_gib: int = 50
    env: tuple[tuple[str, str], ...] = ()
    agent_token: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    agent_script: str = ""
    agent_requirement: str = ""
    start_command: tuple[str, ...] = DEFAULT_START_COMMAND
    # The owner's Kubernetes user names (Entra object id, UPN): port-forward to the pod only.
    owner_users: tuple[str, ...] = ()
    # JupyterLab's login token (Secret key "jupyter-token", env JUPYTER_TOKEN): the user logs in
    # with it and the agent counts busy kernels with it.
    jupyter_token: str = ""


@dataclass(frozen=True)
class PodState:
    """phase: "Running" | "Pending" | "Absent" (no pod: scaled to 0, or not made yet, e.g.
    refused by a quota: reason "FailedCreate") | "Failed"; reason and message are the
    scheduler's, kubelet's or API server's words ("Unschedulable", "ContainerCreating",
    "FailedCreate"...); service_host/service_port: where JupyterLab answers in the cluster."""

    phase: str
    reason: str
    message: str
    ready: bool
    service_host: str
    service_port: int


def _toleration(taint: str) -> dict[str, Any]:
    """ "sku=gpu:NoSchedule" -> Equal toleration; "key:Effect" -> Exists. ValueError else."""
    pair, sep, effect = taint.rpartition(":")
    key, has_value, value = pair.partition("=")
    if not sep or not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise ValueError(f"taint {taint!r} is not of the form key=value:Effect")
    if has_value:
        return {"key": key, "operator": "Equal", "value": value, "effect": effect}
    return {"key": key, "operator": "Exists", "effect": effect}


def _check_mig(spec: MigSpec) -> None:
    for field in ("namespace", "name"):
        value = getattr(spec, field)
        if dns_label(value) != value:
            raise ValueError(f"{field} {value!r} is not a DNS-1123 label")
    if not MIG_PROFILE.match(spec.mig_profile):
        raise ValueError(f"MIG profile {spec.mig_profile!r} is not like '1g.10gb'")
    if spec.home_gib < 1:
        raise ValueError("home_gib must be at least 1")
    if spec.agent_script and not spec.start_command:
        raise ValueError("start_command is needed to start the image after the agent")


def _agent_launcher(requirement: str) -> str:
    """sh -c text: in the background, pynvml installed if missing, then the agent, restarted
    as systemd restarts it on a VM (not after a 410); then exec of "$@" (the image's start
    command), which keeps the container's lifetime the user's process's."""
    agent = f"{AGENT_DIR}/{AGENT_FILE}"
    install = (
        f"python3 -c 'import pynvml' 2>/dev/null || python3 -m pip install --quiet "
        f"--target {AGENT_LIB_DIR} {shlex.quote(requirement)}; "
        if requirement
        else ""
    )
    return (
        f"( {install}while :; do "
        f"PYTHONPATH={AGENT_LIB_DIR}${{PYTHONPATH:+:$PYTHONPATH}} python3 {agent}; "
        f"[ $? -eq {AGENT_EXIT_GONE} ] && break; sleep {AGENT_RESTART_SECONDS}; done ) & "
        'exec "$@"'
    )


def _with_agent(spec: MigSpec, container: dict[str, Any], pod_spec: dict[str, Any]) -> None:
    """Mount the agent's ConfigMap and start it before the image's command (in place)."""
    container["command"] = ["/bin/sh", "-c", _agent_launcher(spec.agent_requirement), "launch"]
    container["args"] = list(spec.start_command)
    mount = {"name": "agent", "mountPath": AGENT_DIR, "readOnly": True}
    container["volumeMounts"].append(mount)
    config_map = {"name": f"{spec.name}-agent-code", "defaultMode": 0o444}
    pod_spec["volumes"].append({"name": "agent", "configMap": config_map})


def _jupyter_env(spec: MigSpec) -> list[dict[str, Any]]:
    if not spec.jupyter_token:
        return []
    ref = {"secretKeyRef": {"name": f"{spec.name}-agent", "key": "jupyter-token"}}
    return [{"name": "JUPYTER_TOKEN", "valueFrom": ref}]


def _statefulset(spec: MigSpec, labels: dict[str, Any]) -> dict[str, Any]:
    resource = {f"{MIG_PREFIX}{spec.mig_profile}": "1"}
    token = {"secretKeyRef": {"name": f"{spec.name}-agent", "key": "token"}}
    env = [{"name": k, "value": v} for k, v in spec.env]
    container = {
        "name": "workspace",
        "image": spec.image,
        "ports": [{"name": "http", "containerPort": JUPYTER_PORT}],
        "resources": {"requests": resource, "limits": resource},
        "env": [*env, {"name": AGENT_TOKEN_ENV, "valueFrom": token}, *_jupyter_env(spec)],
        "volumeMounts": [{"name": "home", "mountPath": "/home"}],
    }
    pod_spec = {
        "nodeSelector": {"agentpool": spec.pool_name},
        "tolerations": [_toleration(t) for t in spec.tolerations],
        "securityContext": {"fsGroup": 100},  # The Jupyter images' "users" group owns /home.
        "containers": [container],
        "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": f"{spec.name}-home"}}],
    }
    if spec.agent_script:
        _with_agent(spec, container, pod_spec)
    selector = {INSTANCE_LABEL: spec.name}
    return {
        "metadata": _meta(spec.name, labels, spec.namespace),
        "spec": {
            "replicas": 1,
            "serviceName": spec.name,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": {**labels, **selector}}, "spec": pod_spec},
        },
    }


def _mig_objects(
    spec: MigSpec, labels: dict[str, Any]
) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(kind, api attribute suffix, name, body) of the namespaced objects, in creation order."""
    ns, name = spec.namespace, spec.name
    string_data = {"token": spec.agent_token}
    if spec.jupyter_token:
        string_data["jupyter-token"] = spec.jupyter_token
    secret = {"metadata": _meta(f"{name}-agent", labels, ns), "type": "Opaque"}
    secret["stringData"] = string_data
    pvc_spec = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{spec.home_gib}Gi"}},
    }
    service_spec = {
        "selector": {INSTANCE_LABEL: name},
        "ports": [{"name": "http", "port": JUPYTER_PORT, "targetPort": JUPYTER_PORT}],
    }
    code = {"metadata": _meta(f"{name}-agent-code", labels, ns)}
    code["data"] = {AGENT_FILE: spec.agent_script}
    agent_code = [("ConfigMap", "config_map", f"{name}-agent-code", code)]
    return [
        ("Secret", "secret", f"{name}-agent", secret),
        *(agent_code if spec.agent_script else []),
        ("PersistentVolumeClaim", "persistent_volume_claim", f"{name}-home", {
            "metadata": _meta(f"{name}-home", labels, ns), "spec": pvc_spec}),
        ("Service", "service", name, {"metadata": _meta(name, labels, ns), "spec": service_spec}),
    ]  # fmt: skip


def mig_ensure(api: ApiClient, spec: MigSpec) -> None:
    """Create whatever of the workspace is missing (StatefulSet with replicas 1); objects
    already there and labelled with this workspace are kept as they are, except the owner's
    Role and RoleBinding, which mig_access brings up to date (and drops the team's old edit
    binding).

    Raises ValueError for a bad spec; CloudError("AlreadyExists") when a name is taken by
    something not this workspace's (or the namespace by something not the portal's, or by a
    namespace workspace, whose team has edit in it); other CloudErrors as the API server
    refused (e.g. Forbidden in a Terminating namespace)."""
    _check_mig(spec)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    labels, ns = _labels(spec.workspace_id, spec.labels), spec.namespace
    mine = lambda found: found.get(WORKSPACE_LABEL) == spec.workspace_id  # noqa: E731
    team_labels = {MANAGED_BY_LABEL: MANAGED_BY}
    with _errors():
        _ensure(
            "Namespace",
            ns,
            lambda: core.create_namespace({"metadata": _meta(ns, team_labels)}),
            lambda: core.read_namespace(ns),
            lambda found: (
                found.get(MANAGED_BY_LABEL) == MANAGED_BY and WORKSPACE_LABEL not in found
            ),
        )
    access = SliceAccess(spec.workspace_id, ns, spec.name, spec.owner_users, spec.labels)
    mig_access(api, access)
    with _errors():
        for kind, attr, name, body in _mig_objects(spec, labels):
            create = getattr(core, f"create_namespaced_{attr}")
            read = getattr(core, f"read_namespaced_{attr}")
            _ensure(kind, name, partial(create, ns, body), partial(read, name, ns), mine)
        _ensure(
            "StatefulSet",
            spec.name,
            lambda: apps.create_namespaced_stateful_set(ns, _statefulset(spec, labels)),
            lambda: apps.read_namespaced_stateful_set(spec.name, ns),
            mine,
        )


@dataclass(frozen=True)
class SliceAccess:
    """Who may reach a MIG workspace's pod: users are the owner's Kubernetes user names (on AKS
    with Entra ID, the UPN of a member of the tenant, the object id of a guest; both may be
    given), () for nobody yet; labels as MigSpec's."""

    workspace_id: str
    namespace: str
    name: str
    users: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()


def _owner_rules(pod: str) -> list[dict[str, Any]]:
    """What `kubectl port-forward pod/<pod>` and `kubectl logs <pod>` need, on that pod only
    (https://kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources):
    get the pod, pods/portforward (create over SPDY; get over WebSocket, which kubectl uses
    from 1.30) and pods/log. No secrets, no exec or attach: the tokens stay out of reach."""
    one = {"apiGroups": [""], "resourceNames": [pod]}
    return [
        {**one, "resources": ["pods"], "verbs": ["get"]},
        {**one, "resources": ["pods/portforward"], "verbs": ["get", "create"]},
        {**one, "resources": ["pods/log"], "verbs": ["get"]},
    ]


def _owner_objects(access: SliceAccess) -> tuple[dict[str, Any], dict[str, Any]]:
    labels, name = _labels(access.workspace_id, access.labels), f"{access.name}-owner"
    role: dict[str, Any] = {"metadata": _meta(name, labels, access.namespace)}
    role["rules"] = _owner_rules(f"{access.name}-0")
    subjects = [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
        for user in dict.fromkeys(access.users)
    ]
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    binding: dict[str, Any] = {"metadata": _meta(name, labels, access.namespace), "roleRef": ref}
    binding["subjects"] = subjects
    return role, binding


def _ensure_fields(
    api: ApiClient,
    kind: str,
    name: str,
    calls: tuple[Callable[[], Any], Callable[[], Any], Callable[[dict[str, Any]], Any]],
    mine: Callable[[Any], bool],
    fields: dict[str, Any],
) -> None:
    """_ensure, then `fields` (lists: rules, subjects) patched onto an existing object of ours
    where they differ. calls: (create, read, patch(body))."""
    create, read, patch = calls
    found = _ensure(kind, name, create, read, mine)
    current = api.sanitize_for_serialization(found) if found is not None else fields
    if any((current.get(key) or []) != value for key, value in fields.items()):
        patch(fields)


def _drop_team_edit(rbac: Any, namespace: str) -> None:
    """The team's edit binding that slices' namespaces had before issue 14 (the portal's, not
    a namespace workspace's): its group could read every member's Secret."""
    found = _quietly(lambda: rbac.read_namespaced_role_binding(ROLE_BINDING_NAME, namespace))
    labels = (found.metadata.labels or {}) if found is not None else {}
    if labels.get(MANAGED_BY_LABEL) == MANAGED_BY and WORKSPACE_LABEL not in labels:
        _quietly(lambda: rbac.delete_namespaced_role_binding(ROLE_BINDING_NAME, namespace))


def mig_access(api: ApiClient, access: SliceAccess) -> None:
    """Make Role and RoleBinding "<name>-owner" say what _owner_rules grants to access.users
    (subjects replaced when they changed; none is allowed), and drop the team's old edit
    binding in the namespace. The namespace must exist. Raises CloudError
    ("AlreadyExists" for a Role or RoleBinding of that name that is not this workspace's)."""
    rbac = client.RbacAuthorizationV1Api(api)
    ns, name = access.namespace, f"{access.name}-owner"
    role, binding = _owner_objects(access)
    mine = lambda found: found.get(WORKSPACE_LABEL) == access.workspace_id  # noqa: E731
    with _errors():
        _drop_team_edit(rbac, ns)
        role_calls = (
            lambda: rbac.create_namespaced_role(ns, role),
            lambda: rbac.read_namespaced_role(name, ns),
            lambda body: rbac.patch_namespaced_role(name, ns, body),
        )
        _ensure_fields(api, "Role", name, role_calls, mine, {"rules": role["rules"]})
        binding_calls = (
            lambda: rbac.create_namespaced_role_binding(ns, binding),
            lambda: rbac.read_namespaced_role_binding(name, ns),
            lambda body: rbac.patch_namespaced_role_binding(name, ns, body),
        )
        fields = {"subjects": binding["subjects"]}
        _ensure_fields(api, "RoleBinding", name, binding_calls, mine, fields)


def mig_scale(api: ApiClient, *, namespace: str, name: str, replicas: int) -> None:
    """Set the StatefulSet's replicas (0: stop, the PVC stays; 1: start) through /scale.
    Raises CloudError("NotFound") when it does not exist."""
    body = {"spec": {"replicas": replicas}}
    with _errors():
        client.AppsV1Api(api).patch_namespaced_stateful_set_scale(name, namespace, body)


def _condition(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


def _pod_state(pod: Any, host: str) -> PodState:
    phase, status = pod.status.phase or "Pending", pod.status
    if phase == "Running":
        ready = _condition(pod, "Ready")
        return PodState(
            "Running", "", "", bool(ready and ready.status == "True"), host, JUPYTER_PORT
        )
    if phase in ("Failed", "Succeeded"):
        reason = status.reason or ("Completed" if phase == "Succeeded" else "Error")
        return PodState("Failed", reason, status.message or "", False, host, JUPYTER_PORT)
    scheduled = _condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.status == "False":
        reason, message = scheduled.reason or "", scheduled.message or ""
        return PodState("Pending", reason, message, False, host, JUPYTER_PORT)
    waiting = next(
        (s.state.waiting for s in status.container_statuses or [] if s.state and s.state.waiting),
        None,
    )
    reason, message = (waiting.reason or "", waiting.message or "") if waiting else ("", "")
    return PodState("Pending", reason, message, False, host, JUPYTER_PORT)


def _absent_state(api: ApiClient, namespace: str, name: str, host: str) -> PodState:
    """No pod: scaled to 0, not made yet, or refused (the controller's FailedCreate event)."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    sts = _quietly(lambda: apps.read_namespaced_stateful_set(name, namespace))
    if sts is None or sts.spec.replicas == 0:
        return PodState("Absent", "", "", False, host, JUPYTER_PORT)
    selector = f"involvedObject.kind=StatefulSet,involvedObject.name={name},reason=FailedCreate"
    events = core.list_namespaced_event(namespace, field_selector=selector).items
    events = [e for e in events if e.involved_object.uid == sts.metadata.uid]
    if not events:
        return PodState("Absent", "", "", False, host, JUPYTER_PORT)
    latest = max(events, key=lambda e: e.last_timestamp or e.metadata.creation_timestamp)
    return PodState("Absent", "FailedCreate", latest.message or "", False, host, JUPYTER_PORT)


def mig_state(api: ApiClient, *, namespace: str, name: str) -> PodState:
    """Where the workspace's pod is: Running (and ready?), Pending with the scheduler's
    reason/message (Unschedulable: "0/3 nodes are available: 1 Insufficient
    nvidia.com/mig-1g.10gb, ..."), Absent, or Failed. Raises CloudError."""
    host = f"{name}.{namespace}.svc.cluster.local"
    with _errors():
        pod = _quietly(lambda: client.CoreV1Api(api).read_namespaced_pod(f"{name}-0", namespace))
        if pod is None or pod.metadata.deletion_timestamp:
            return _absent_state(api, namespace, name, host)
        return _pod_state(pod, host)


def mig_delete(api: ApiClient, *, namespace: str, name: str) -> bool:
    """Delete the StatefulSet (its pod goes with it), Service, Secret, the agent's ConfigMap,
    PVC and the owner's Role and RoleBinding; True once all of them and the pod are gone (the
    PVC outlives its pod), else call again. Raises CloudError."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    rbac, owner = client.RbacAuthorizationV1Api(api), f"{name}-owner"
    background = client.V1DeleteOptions(propagation_policy="Background")
    parts = [
        (lambda: apps.delete_namespaced_stateful_set(name, namespace, body=background),
         lambda: apps.read_namespaced_stateful_set(name, namespace)),
        (lambda: core.delete_namespaced_service(name, namespace),
         lambda: core.read_namespaced_service(name, namespace)),
        (lambda: core.delete_namespaced_secret(f"{name}-agent", namespace),
         lambda: core.read_namespaced_secret(f"{name}-agent", namespace)),
        (lambda: core.delete_namespaced_config_map(f"{name}-agent-code", namespace),
         lambda: core.read_namespaced_config_map(f"{name}-agent-code", namespace)),
        (lambda: core.delete_namespaced_persistent_volume_claim(f"{name}-home", namespace),
         lambda: core.read_namespaced_persistent_volume_claim(f"{name}-home", namespace)),
        (lambda: rbac.delete_namespaced_role_binding(owner, namespace),
         lambda: rbac.read_namespaced_role_binding(owner, namespace)),
        (lambda: rbac.delete_namespaced_role(owner, namespace),
         lambda: rbac.read_namespaced_role(owner, namespace)),
    ]  # fmt: skip
    with _errors():
        for delete, _ in parts:
            _quietly(delete)
        reads = [read for _, read in parts]
        reads.append(lambda: core.read_namespaced_pod(f"{name}-0", namespace))
        return all(_missing(read) for read in reads)


# --- namespace workspaces -------------------------------------------------------------------


@dataclass(frozen=True)
class NamespaceSpec:
    """A team namespace workspace. name: a DNS-1123 label (see dns_label); group_object_id: the
    team's Entra ID group (RoleBinding subject, kind Group); gpus: requests.nvidia.com/gpu;
    mig: (("1g.10gb", 7),) -> requests.nvidia.com/mig-1g.10gb: 7; cpu, memory: requests.cpu
    and requests.memory quota as Kubernetes quantities."""

    workspace_id: str
    name: str
    group_object_id: str
    gpus: int
    mig: tuple[tuple[str, int], ...] = ()
    cpu: str = "32"
    memory: str = "256Gi"
    labels: tuple[tuple[str, str], ...] = ()


def _hard(spec: NamespaceSpec) -> dict[str, str]:
    hard = {f"requests.{GPU}": str(spec.gpus)}
    hard.update({f"requests.{MIG_PREFIX}{profile}": str(n) for profile, n in spec.mig})
    hard.update({"requests.cpu": spec.cpu, "requests.memory": spec.memory})
    return hard


def _namespace_objects(
    spec: NamespaceSpec, labels: dict[str, Any]
) -> list[tuple[str, str, str, dict[str, Any]]]:
    ns = spec.name
    quota = {"metadata": _meta(QUOTA_NAME, labels, ns), "spec": {"hard": _hard(spec)}}
    limits = [{"type": "Container", "default": DEFAULT_LIMIT, "defaultRequest": DEFAULT_REQUEST}]
    limit_range = {"metadata": _meta(LIMIT_RANGE_NAME, labels, ns), "spec": {"limits": limits}}
    binding = {
        "metadata": _meta(ROLE_BINDING_NAME, labels, ns),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": spec.group_object_id}
        ],
    }
    policy_spec = {
        "podSelector": {},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {}}]}],
    }
    policy = {"metadata": _meta(NETWORK_POLICY_NAME, labels, ns), "spec": policy_spec}
    return [
        ("ResourceQuota", "CoreV1Api", "resource_quota", quota),
        ("LimitRange", "CoreV1Api", "limit_range", limit_range),
        ("RoleBinding", "RbacAuthorizationV1Api", "role_binding", binding),
        ("NetworkPolicy", "NetworkingV1Api", "network_policy", policy),
    ]


def namespace_ensure(api: ApiClient, spec: NamespaceSpec) -> None:
    """Create what is missing of: the namespace, ResourceQuota "portal-quota", LimitRange
    "portal-defaults", RoleBinding "team-edit" (ClusterRole edit to the team's group) and
    NetworkPolicy "deny-other-namespaces" (ingress only from pods of this namespace).
    Raises ValueError for a bad name, CloudError("AlreadyExists") for a name someone else
    holds, other CloudErrors as refused."""
    if dns_label(spec.name) != spec.name:
        raise ValueError(f"namespace {spec.name!r} is not a DNS-1123 label")
    core, labels, ns = client.CoreV1Api(api), _labels(spec.workspace_id, spec.labels), spec.name
    mine = lambda found: found.get(WORKSPACE_LABEL) == spec.workspace_id  # noqa: E731
    with _errors():
        _ensure(
            "Namespace",
            ns,
            lambda: core.create_namespace({"metadata": _meta(ns, labels)}),
            lambda: core.read_namespace(ns),
            mine,
        )
        for kind, api_class, attr, body in _namespace_objects(spec, labels):
            typed = getattr(client, api_class)(api)
            create = getattr(typed, f"create_namespaced_{attr}")
            read = getattr(typed, f"read_namespaced_{attr}")
            name = body["metadata"]["name"]
            _ensure(kind, name, partial(create, ns, body), partial(read, name, ns), mine)


def _workloads(api: ApiClient, namespace: str) -> Iterator[tuple[Callable[..., Any], Any]]:
    """(patch function, object) of every Deployment and StatefulSet in the namespace."""
    apps = client.AppsV1Api(api)
    for obj in apps.list_namespaced_deployment(namespace).items:
        yield apps.patch_namespaced_deployment, obj
    for obj in apps.list_namespaced_stateful_set(namespace).items:
        yield apps.patch_namespaced_stateful_set, obj


def namespace_stop(api: ApiClient, *, name: str) -> None:
    """GPU and MIG quota to 0; every Deployment and StatefulSet scaled to 0, its replicas kept
    in annotation REPLICAS_ANNOTATION (a second run changes nothing). Raises CloudError."""
    core = client.CoreV1Api(api)
    with _errors():
        quota = _quietly(lambda: core.read_namespaced_resource_quota(QUOTA_NAME, name))
        if quota is not None:
            hard = quota.spec.hard or {}
            zero = {
                k: "0"
                for k in hard
                if k == f"requests.{GPU}" or k.startswith(f"requests.{MIG_PREFIX}")
            }
            core.patch_namespaced_resource_quota(QUOTA_NAME, name, {"spec": {"hard": zero}})
        for patch, obj in _workloads(api, name):
            replicas = 1 if obj.spec.replicas is None else obj.spec.replicas
            if replicas > 0:
                annotations = {REPLICAS_ANNOTATION: str(replicas)}
                body = {"metadata": {"annotations": annotations}, "spec": {"replicas": 0}}
                patch(obj.metadata.name, name, body)


def namespace_start(api: ApiClient, spec: NamespaceSpec) -> None:
    """namespace_ensure, the quota back to the spec's, and each stopped workload back to the
    replicas its annotation remembers. Raises as namespace_ensure."""
    namespace_ensure(api, spec)
    core = client.CoreV1Api(api)
    with _errors():
        current = core.read_namespaced_resource_quota(QUOTA_NAME, spec.name).spec.hard or {}
        hard: dict[str, str | None] = {k: None for k in current}
        hard.update(_hard(spec))
        core.patch_namespaced_resource_quota(QUOTA_NAME, spec.name, {"spec": {"hard": hard}})
        for patch, obj in _workloads(api, spec.name):
            remembered = (obj.metadata.annotations or {}).get(REPLICAS_ANNOTATION)
            if remembered is not None and remembered.isdigit():
                annotations = {REPLICAS_ANNOTATION: None}
                body = {
                    "metadata": {"annotations": annotations},
                    "spec": {"replicas": int(remembered)},
                }
                patch(obj.metadata.name, spec.name, body)


def namespace_delete(api: ApiClient, *, name: str, workspace_id: str) -> bool:
    """Delete the namespace if it is the workspace's (its WORKSPACE_LABEL; everything in it goes
    with it). True once it is gone or is not the workspace's (someone else's is never touched),
    False while it is Terminating. Raises CloudError."""
    core = client.CoreV1Api(api)
    with _errors():
        found = _quietly(lambda: core.read_namespace(name))
        if found is None or (found.metadata.labels or {}).get(WORKSPACE_LABEL) != workspace_id:
            return True
        _quietly(lambda: core.delete_namespace(name))
        return _missing(lambda: core.read_namespace(name))


def namespace_phase(api: ApiClient, *, name: str) -> str:
    """ "Active", "Terminating" or "Absent". Raises CloudError."""
    with _errors():
        found = _quietly(lambda: client.CoreV1Api(api).read_namespace(name))
    return "Absent" if found is None else (found.status.phase or "Active")


def _gpu_requests(pod: Any) -> dict[str, int]:
    """GPU and MIG resources a pod asks for ({resource: count}), from requests or limits."""
    found: dict[str, int] = {}
    for container in pod.spec.containers or []:
        resources = container.resources
        wanted = {
            **((resources and resources.limits) or {}),
            **((resources and resources.requests) or {}),
        }
        for key, value in wanted.items():
            if key == GPU or key.startswith(MIG_PREFIX):
                found[key] = found.get(key, 0) + _count(value)
    return found


def _count(value: Any) -> int:
    try:
        return int(Decimal(str(value)))
    except (InvalidOperation, ValueError):
        return 0  # Extended resources are whole numbers; anything else is none of ours.


def namespace_gpu_pods(api: ApiClient, *, name: str) -> int:
    """Running pods in the namespace that request nvidia.com/gpu or nvidia.com/mig-*
    (what idle detection counts). Raises CloudError."""
    with _errors():
        pods = client.CoreV1Api(api).list_namespaced_pod(
            name, field_selector="status.phase=Running"
        )
    return sum(1 for pod in pods.items if any(_gpu_requests(pod).values()))


# --- capacity -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolCapacity:
    """GPU capacity of one node pool: resource "nvidia.com/gpu" or "nvidia.com/mig-1g.10gb";
    total: allocatable over the pool's nodes; used: requested by pods bound to them."""

    pool: str
    resource: str
    total: int
    used: int


def pool_capacity(api: ApiClient) -> list[PoolCapacity]:
    """GPU and MIG capacity per node pool (label agentpool), sorted by pool and resource, from
    one list of nodes and one of live bound pods. Raises CloudError."""
    core = client.CoreV1Api(api)
    live = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    with _errors():
        nodes = core.list_node().items
        pods = core.list_pod_for_all_namespaces(field_selector=live).items
    pool_of = {n.metadata.name: (n.metadata.labels or {}).get("agentpool", "") for n in nodes}
    totals: dict[tuple[str, str], list[int]] = {}
    for node in nodes:
        for key, value in (node.status.allocatable or {}).items():
            if key == GPU or key.startswith(MIG_PREFIX):
                totals.setdefault((pool_of[node.metadata.name], key), [0, 0])[0] += _count(value)
    for pod in pods:
        for key, count in _gpu_requests(pod).items():
            pool = pool_of.get(pod.spec.node_name)
            if pool is not None and (pool, key) in totals:
                totals[(pool, key)][1] += count
    return [PoolCapacity(p, r, t, u) for (p, r), (t, u) in sorted(totals.items())]


# --- names ----------------------------------------------------------------------------------


def dns_label(text: str, *, max_len: int = 63) -> str:
    """A DNS-1123 label from free text: accents folded to ASCII, lower case, runs of anything
    but [a-z0-9] turned into one "-", trimmed to max_len (1..63), starting and ending with a
    letter or digit. "Vision Lab (É)" -> "vision-lab-e". ValueError when nothing is left."""
    if not 1 <= max_len <= 63:
        raise ValueError("max_len must be between 1 and 63")
    ascii_text = unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode()
    label = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    label = label[:max_len].rstrip("-")
    if not label:
        raise ValueError(f"{text!r} has no letters or digits to make a Kubernetes name from")
    return label
