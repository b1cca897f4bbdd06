"""MIG slices on AKS: one workspace is a one-replica StatefulSet with its PVC, Service, agent
Secret and (given the agent's program) ConfigMap, and an owner-only Role and RoleBinding
(cloud.kube_access; see cloud.kube for the shapes). Ensure, scale, read the pod's state, delete.

Errors raised: CloudError (cloud.kube_core.from_kube).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client import ApiClient

from .kube_access import SliceAccess, mig_access
from .kube_core import (
    AGENT_DIR,
    AGENT_EXIT_GONE,
    AGENT_FILE,
    AGENT_LIB_DIR,
    AGENT_RESTART_SECONDS,
    AGENT_TOKEN_ENV,
    DEFAULT_START_COMMAND,
    INSTANCE_LABEL,
    JUPYTER_PORT,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MIG_PREFIX,
    MIG_PROFILE,
    WORKSPACE_LABEL,
    _errors,
    _labels,
    _meta,
    _missing,
    _quietly,
    dns_label,
)
from .kube_ensure import Namespaced, namespace_create, objects_create, owned_by
from .kube_lab import page_config_mount, page_config_objects
from .kube_nfs import NfsVolume, nfs_ensure, pod_parts
from .kube_vscode import VSCODE_SECRET_KEY, vscode_container, vscode_service_port


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
    # JupyterLab's token (Secret key "jupyter-token", env JUPYTER_TOKEN): the app proxy adds it
    # to each request and the agent counts busy kernels with it; ConfigMap
    # "<name>-page-config" blanks it in JupyterLab's pages (cloud.kube_lab).
    jupyter_token: str = ""
    # 0 makes it stopped (a slice moved to another profile while stopped, or before its start).
    replicas: int = 1
    # The team's shares and the owner's home (cloud.kube_nfs), mounted where a VM mounts them.
    nfs: tuple[NfsVolume, ...] = ()
    # code-server's HASHED_PASSWORD (Secret "<name>-agent", key "vscode-password-hash"): a
    # sidecar runs VS Code on port 8080 of the Service (cloud.kube_vscode); "" runs none.
    vscode_password_hash: str = ""


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
    nfs_mounts, nfs_volumes = pod_parts(spec.nfs)
    # JupyterLab's pages carry no token: the app proxy adds it to each request (cloud.kube_lab).
    page_mount, page_volume = page_config_mount(f"{spec.name}-page-config")
    if spec.jupyter_token:
        nfs_mounts, nfs_volumes = [*nfs_mounts, page_mount], [*nfs_volumes, page_volume]
    container = {
        "name": "workspace",
        "image": spec.image,
        "ports": [{"name": "http", "containerPort": JUPYTER_PORT}],
        "resources": {"requests": resource, "limits": resource},
        "env": [*env, {"name": AGENT_TOKEN_ENV, "valueFrom": token}, *_jupyter_env(spec)],
        "volumeMounts": [{"name": "home", "mountPath": "/home"}, *nfs_mounts],
    }
    pod_spec = {
        "nodeSelector": {"agentpool": spec.pool_name},
        "tolerations": [_toleration(t) for t in spec.tolerations],
        "securityContext": {"fsGroup": 100},  # The Jupyter images' "users" group owns /home.
        "containers": [container],
        "volumes": [
            {"name": "home", "persistentVolumeClaim": {"claimName": f"{spec.name}-home"}},
            *nfs_volumes,
        ],
    }
    if spec.vscode_password_hash:  # Same files as JupyterLab's: /home and the shares.
        data_mounts = [{"name": "home", "mountPath": "/home"}, *pod_parts(spec.nfs)[0]]
        sidecar = vscode_container(f"{spec.name}-agent", data_mounts)
        pod_spec["containers"] = [container, sidecar]
    if spec.agent_script:
        _with_agent(spec, container, pod_spec)
    selector = {INSTANCE_LABEL: spec.name}
    return {
        "metadata": _meta(spec.name, labels, spec.namespace),
        "spec": {
            "replicas": spec.replicas,
            "serviceName": spec.name,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": {**labels, **selector}}, "spec": pod_spec},
        },
    }


def _mig_objects(spec: MigSpec, labels: dict[str, Any]) -> list[Namespaced]:
    """The namespaced objects (cloud.kube_ensure.Namespaced), in creation order."""
    ns, name = spec.namespace, spec.name
    string_data = {"token": spec.agent_token}
    if spec.jupyter_token:
        string_data["jupyter-token"] = spec.jupyter_token
    if spec.vscode_password_hash:
        string_data[VSCODE_SECRET_KEY] = spec.vscode_password_hash
    secret = {"metadata": _meta(f"{name}-agent", labels, ns), "type": "Opaque"}
    secret["stringData"] = string_data
    pvc_spec = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": f"{spec.home_gib}Gi"}},
    }
    ports = [{"name": "http", "port": JUPYTER_PORT, "targetPort": JUPYTER_PORT}]
    if spec.vscode_password_hash:
        ports.append(vscode_service_port())
    service_spec = {"selector": {INSTANCE_LABEL: name}, "ports": ports}
    code = {"metadata": _meta(f"{name}-agent-code", labels, ns)}
    code["data"] = {AGENT_FILE: spec.agent_script}
    agent_code = [("ConfigMap", "CoreV1Api", "config_map", code)]
    page_config = page_config_objects(f"{name}-page-config", labels, ns)
    return [
        ("Secret", "CoreV1Api", "secret", secret),
        *(agent_code if spec.agent_script else []),
        *(page_config if spec.jupyter_token else []),
        ("PersistentVolumeClaim", "CoreV1Api", "persistent_volume_claim", {
            "metadata": _meta(f"{name}-home", labels, ns), "spec": pvc_spec}),
        ("Service", "CoreV1Api", "service", {"metadata": _meta(name, labels, ns),
                                             "spec": service_spec}),
        ("StatefulSet", "AppsV1Api", "stateful_set", _statefulset(spec, labels)),
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
    labels, ns = _labels(spec.workspace_id, spec.labels), spec.namespace
    # The slices' namespace is the team's: the portal's, and no namespace workspace's.
    namespace_create(
        api,
        ns,
        {MANAGED_BY_LABEL: MANAGED_BY},
        lambda found: found.get(MANAGED_BY_LABEL) == MANAGED_BY and WORKSPACE_LABEL not in found,
    )
    access = SliceAccess(spec.workspace_id, ns, spec.name, spec.owner_users, spec.labels)
    mig_access(api, access)
    nfs_ensure(api, ns, spec.nfs)
    objects_create(api, ns, _mig_objects(spec, labels), owned_by(spec.workspace_id))


def mig_scale(api: ApiClient, *, namespace: str, name: str, replicas: int) -> None:
    """Set the StatefulSet's replicas (0: stop, the PVC stays; 1: start) through /scale.
    Raises CloudError("NotFound") when it does not exist."""
    body = {"spec": {"replicas": replicas}}
    with _errors():
        client.AppsV1Api(api).patch_namespaced_stateful_set_scale(name, namespace, body)


def mig_profile_now(api: ApiClient, *, namespace: str, name: str) -> str | None:
    """The MIG profile ("1g.10gb") the workspace's StatefulSet requests, or None when neither
    it nor its pod exists any more ("" while one of them is still there without a MIG
    request, e.g. being deleted). Raises CloudError."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    with _errors():
        sts = _quietly(lambda: apps.read_namespaced_stateful_set(name, namespace))
        if sts is None or sts.metadata.deletion_timestamp:
            pod = _quietly(lambda: core.read_namespaced_pod(f"{name}-0", namespace))
            return None if pod is None else ""
    for container in sts.spec.template.spec.containers:
        for resource in (container.resources.requests or {}) if container.resources else {}:
            if resource.startswith(MIG_PREFIX):
                return str(resource[len(MIG_PREFIX) :])
    return ""


def mig_statefulset_delete(api: ApiClient, *, namespace: str, name: str) -> None:
    """Delete the workspace's StatefulSet (its pod goes with it) and nothing else: its PVC
    (/home), Service, Secret and access stay, for a StatefulSet on another pool or profile
    (mig_ensure). Absent is fine. Raises CloudError."""
    background = client.V1DeleteOptions(propagation_policy="Background")
    apps = client.AppsV1Api(api)
    with _errors():
        _quietly(lambda: apps.delete_namespaced_stateful_set(name, namespace, body=background))


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
    """Delete the StatefulSet (its pod goes with it), Service, Secret, the agent's and the
    page config's ConfigMaps, PVC and the owner's Role and RoleBinding; True once all of them
    and the pod are gone (the PVC outlives its pod), else call again. Raises CloudError."""
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
        (lambda: core.delete_namespaced_config_map(f"{name}-page-config", namespace),
         lambda: core.read_namespaced_config_map(f"{name}-page-config", namespace)),
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
