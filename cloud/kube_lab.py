"""JupyterLab in Kubernetes, as the portal's app proxy opens it (docs/apps.md).

A team namespace gets its own (lab_objects): a Deployment "portal-jupyterlab" of one pod, its
ClusterIP Service, its token in a Secret, and a NetworkPolicy that lets the app proxy's
namespace in on JupyterLab's port. A MIG slice's pod runs JupyterLab itself (cloud.kube_mig).
Both mount page_config.json (page_config_objects): JupyterLab copies its token into every page
it serves unless that file blanks it, and the proxy adds the token to each request instead, so
it never reaches a browser (as a VM's cloud-init does, agent/environment_init.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .kube_core import INSTANCE_LABEL, JUPYTER_PORT, _meta
from .kube_ensure import Namespaced
from .kube_nfs import NfsVolume, pod_parts
from .kube_vscode import VSCODE_PORT, VSCODE_SECRET_KEY, vscode_container, vscode_service_port

LAB_NAME = "portal-jupyterlab"  # Not "jupyterlab": the team may deploy one of its own.
LAB_TOKEN_KEY = "jupyter-token"
APP_PROXY_POLICY = "portal-app-proxy"
# The label an operator puts on the app proxy's namespace (docs/operations.md, "The app
# proxy"); the team's edit role cannot label namespaces, so no team pod can pose as the proxy.
APP_PROXY_LABEL = "portal.azure.com/app-proxy"
# jupyterlab_server merges /etc/jupyter/labconfig/page_config.json over the page config it
# serves (its get_static_page_config); the Jupyter Docker Stacks images read /etc/jupyter.
PAGE_CONFIG_DIR = "/etc/jupyter/labconfig"
PAGE_CONFIG_FILE = "page_config.json"


@dataclass(frozen=True)
class LabSpec:
    """A team namespace's JupyterLab: ``image`` (a Jupyter Docker Stacks image or one started
    the same way: its start command reads JUPYTER_TOKEN), ``token`` (Secret
    "portal-jupyterlab-token", key "jupyter-token"), ``cpu`` and ``memory`` its requests and
    limits as Kubernetes quantities, counted in the namespace's ResourceQuota. It requests no
    GPU: the quota's GPUs stay for the team's workloads, and the idle scan counts pods that
    request GPUs."""

    image: str
    token: str
    cpu: str = "1"
    memory: str = "4Gi"
    # code-server's HASHED_PASSWORD (the token's Secret, key "vscode-password-hash"): a sidecar
    # runs VS Code on the Service's port 8080 (cloud.kube_vscode); "" runs none.
    vscode_password_hash: str = ""


def page_config_objects(name: str, labels: dict[str, Any], namespace: str) -> list[Namespaced]:
    """ConfigMap ``name`` holding page_config.json with the token blanked."""
    body = {
        "metadata": _meta(name, labels, namespace),
        "data": {PAGE_CONFIG_FILE: json.dumps({"token": ""})},
    }
    return [("ConfigMap", "CoreV1Api", "config_map", body)]


def page_config_mount(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(volumeMount, volume) of ConfigMap ``name`` at /etc/jupyter/labconfig/page_config.json
    (a subPath: the image's other files in /etc/jupyter stay)."""
    mount = {
        "name": "page-config",
        "mountPath": f"{PAGE_CONFIG_DIR}/{PAGE_CONFIG_FILE}",
        "subPath": PAGE_CONFIG_FILE,
        "readOnly": True,
    }
    return mount, {"name": "page-config", "configMap": {"name": name}}


def _deployment(
    spec: LabSpec, labels: dict[str, Any], ns: str, nfs: tuple[NfsVolume, ...]
) -> dict[str, Any]:
    resources = {"cpu": spec.cpu, "memory": spec.memory}
    token = {"secretKeyRef": {"name": f"{LAB_NAME}-token", "key": LAB_TOKEN_KEY}}
    page_mount, page_volume = page_config_mount(f"{LAB_NAME}-page-config")
    nfs_mounts, nfs_volumes = pod_parts(nfs)
    container = {
        "name": "jupyterlab",
        "image": spec.image,
        "ports": [{"name": "http", "containerPort": JUPYTER_PORT}],
        "env": [{"name": "JUPYTER_TOKEN", "valueFrom": token}],
        "resources": {"requests": resources, "limits": resources},
        "readinessProbe": {"tcpSocket": {"port": JUPYTER_PORT}, "periodSeconds": 5},
        "volumeMounts": [page_mount, *nfs_mounts],
    }
    selector = {INSTANCE_LABEL: LAB_NAME}
    containers = [container]
    if spec.vscode_password_hash:  # The same shares as JupyterLab's, not its page config.
        containers.append(vscode_container(f"{LAB_NAME}-token", nfs_mounts))
    pod_spec = {
        "securityContext": {"fsGroup": 100},  # The Jupyter images' "users" group.
        "containers": containers,
        "volumes": [page_volume, *nfs_volumes],
    }
    return {
        "metadata": _meta(LAB_NAME, labels, ns),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "strategy": {"type": "Recreate"},  # One JupyterLab at a time on its files.
            "template": {"metadata": {"labels": {**labels, **selector}}, "spec": pod_spec},
        },
    }


def lab_objects(
    spec: LabSpec, labels: dict[str, Any], ns: str, nfs: tuple[NfsVolume, ...] = ()
) -> list[Namespaced]:
    """A namespace's JupyterLab objects, in creation order; ``nfs`` the namespace's share
    claims (cloud.kube_nfs), mounted where a VM mounts them."""
    string_data = {LAB_TOKEN_KEY: spec.token}
    secret = {
        "metadata": _meta(f"{LAB_NAME}-token", labels, ns),
        "type": "Opaque",
        "stringData": string_data,
    }
    ports = [{"name": "http", "port": JUPYTER_PORT, "targetPort": JUPYTER_PORT}]
    allowed = [{"protocol": "TCP", "port": JUPYTER_PORT}]
    if spec.vscode_password_hash:
        string_data[VSCODE_SECRET_KEY] = spec.vscode_password_hash
        ports.append(vscode_service_port())
        allowed.append({"protocol": "TCP", "port": VSCODE_PORT})
    service = {
        "metadata": _meta(LAB_NAME, labels, ns),
        "spec": {"type": "ClusterIP", "selector": {INSTANCE_LABEL: LAB_NAME}, "ports": ports},
    }
    proxy = {"namespaceSelector": {"matchLabels": {APP_PROXY_LABEL: "true"}}}
    policy_spec = {
        "podSelector": {"matchLabels": {INSTANCE_LABEL: LAB_NAME}},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [proxy], "ports": allowed}],
    }
    policy = {"metadata": _meta(APP_PROXY_POLICY, labels, ns), "spec": policy_spec}
    return [
        ("Secret", "CoreV1Api", "secret", secret),
        *page_config_objects(f"{LAB_NAME}-page-config", labels, ns),
        ("Service", "CoreV1Api", "service", service),
        ("NetworkPolicy", "NetworkingV1Api", "network_policy", policy),
        ("Deployment", "AppsV1Api", "deployment", _deployment(spec, labels, ns, nfs)),
    ]


def lab_host(namespace: str) -> str:
    """The cluster DNS name of a namespace's JupyterLab Service (port JUPYTER_PORT)."""
    return f"{LAB_NAME}.{namespace}.svc.cluster.local"
