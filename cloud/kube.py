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

The code lives in cloud.kube_core (client, errors, shared helpers, capacity, names),
cloud.kube_mig (MIG slices), cloud.kube_access (a slice's owner-only rights),
cloud.kube_namespace (team namespaces), cloud.kube_lab (a namespace's JupyterLab, and the
page config that keeps JupyterLab's token out of its pages) and cloud.kube_ensure (the
idempotent creates both kinds share); this module is their public face, so callers keep
writing ``kube.<name>``.
"""

from .kube_access import SliceAccess, mig_access
from .kube_core import (
    AGENT_DIR,
    AGENT_EXIT_GONE,
    AGENT_FILE,
    AGENT_LIB_DIR,
    AGENT_RESTART_SECONDS,
    AGENT_TOKEN_ENV,
    AKS_SERVER_SCOPE,
    DEFAULT_LIMIT,
    DEFAULT_REQUEST,
    DEFAULT_START_COMMAND,
    GPU,
    INSTANCE_LABEL,
    JUPYTER_PORT,
    LIMIT_RANGE_NAME,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MIG_PREFIX,
    MIG_PROFILE,
    NETWORK_POLICY_NAME,
    QUOTA_NAME,
    REPLICAS_ANNOTATION,
    RETRY_STATUSES,
    ROLE_BINDING_NAME,
    TOKEN_MARGIN,
    WORKSPACE_LABEL,
    KubeApi,
    PoolCapacity,
    _errors,
    _TokenHook,
    dns_label,
    from_kube,
    kube_api,
    pool_capacity,
)
from .kube_lab import LAB_NAME, LabSpec, lab_host
from .kube_mig import (
    MigSpec,
    PodState,
    mig_delete,
    mig_ensure,
    mig_profile_now,
    mig_scale,
    mig_state,
    mig_statefulset_delete,
)
from .kube_namespace import (
    NamespaceSpec,
    _hard,
    namespace_delete,
    namespace_ensure,
    namespace_gpu_pods,
    namespace_phase,
    namespace_start,
    namespace_stop,
)
from .kube_nfs import NfsVolume

__all__ = [
    "KubeApi",
    "LAB_NAME",
    "LabSpec",
    "AGENT_DIR",
    "AGENT_EXIT_GONE",
    "AGENT_FILE",
    "AGENT_LIB_DIR",
    "AGENT_RESTART_SECONDS",
    "AGENT_TOKEN_ENV",
    "AKS_SERVER_SCOPE",
    "DEFAULT_LIMIT",
    "DEFAULT_REQUEST",
    "DEFAULT_START_COMMAND",
    "GPU",
    "INSTANCE_LABEL",
    "JUPYTER_PORT",
    "LIMIT_RANGE_NAME",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "MIG_PREFIX",
    "MIG_PROFILE",
    "MigSpec",
    "NETWORK_POLICY_NAME",
    "NamespaceSpec",
    "NfsVolume",
    "PodState",
    "PoolCapacity",
    "QUOTA_NAME",
    "REPLICAS_ANNOTATION",
    "RETRY_STATUSES",
    "ROLE_BINDING_NAME",
    "SliceAccess",
    "TOKEN_MARGIN",
    "WORKSPACE_LABEL",
    "_TokenHook",
    "_errors",
    "_hard",
    "dns_label",
    "from_kube",
    "kube_api",
    "lab_host",
    "mig_access",
    "mig_delete",
    "mig_ensure",
    "mig_profile_now",
    "mig_scale",
    "mig_state",
    "mig_statefulset_delete",
    "namespace_delete",
    "namespace_ensure",
    "namespace_gpu_pods",
    "namespace_phase",
    "namespace_start",
    "namespace_stop",
    "pool_capacity",
]
