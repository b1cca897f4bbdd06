"""The telemetry agents that run inside pods (docs/agent-protocol.md §1b), as the emulator sees
them: a container whose environment names the portal runs the agent on the pod's GPU devices.

Pure reads of one cluster's store; the caller holds Cloud.lock. The token comes from the
Secret a ``secretKeyRef`` names (its base64 ``data``), as the kubelet would resolve it.
"""

import base64
import binascii
import math
from dataclasses import dataclass

from ..agent_protocol import AgentConfig

URL_ENV, WORKSPACE_ENV = "GPU_PORTAL_URL", "GPU_PORTAL_WORKSPACE"
TOKEN_ENV, INTERVAL_ENV = "PORTAL_AGENT_TOKEN", "GPU_PORTAL_INTERVAL_SECONDS"
DEFAULT_INTERVAL = 30.0  # Seconds, as the agent defaults GPU_PORTAL_INTERVAL_SECONDS.
MIG_PREFIX = "nvidia.com/mig-"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class PodAgent:
    """One pod's agent. name: its StatefulSet's (what the portal and /_sim/agents call it), else
    the pod's; running: phase Running and not being deleted; vm_size: its node's instance type
    ("" while unscheduled); mig_profile: the "1g.10gb" it holds, else None; gpus: whole GPUs it
    holds (0 with a MIG device or none)."""

    name: str
    config: AgentConfig
    running: bool
    vm_size: str
    mig_profile: str | None
    gpus: int


def pod_agents(cluster) -> list[PodAgent]:
    """Every pod of the cluster with a container that runs the agent, oldest first."""
    found = []
    for pod in cluster.items("pods"):
        namespace = pod["metadata"].get("namespace", "")
        for container in (pod.get("spec") or {}).get("containers") or []:
            config = container_config(cluster, namespace, container)
            if config is not None:
                found.append(_agent(cluster, pod, container, config))
                break  # One agent per pod: it reports the whole pod's devices.
    return found


def container_config(cluster, namespace: str, container: dict) -> AgentConfig | None:
    """The agent config a container's env gives, or None when the agent would not run (a
    variable missing or empty, the token's Secret or key absent, a bad interval)."""
    env = {e.get("name"): e for e in container.get("env") or [] if isinstance(e, dict)}
    url, workspace = _value(env.get(URL_ENV)), _value(env.get(WORKSPACE_ENV))
    token = _token(cluster, namespace, env.get(TOKEN_ENV))
    interval = _interval(_value(env.get(INTERVAL_ENV)))
    if not (url and workspace and token) or interval is None:
        return None
    return AgentConfig(url.rstrip("/"), workspace, token, interval)


def _value(entry: dict | None) -> str:
    value = (entry or {}).get("value")
    return value if isinstance(value, str) else ""


def _token(cluster, namespace: str, entry: dict | None) -> str:
    """A plain value, or the Secret key a secretKeyRef names (base64 data, decoded)."""
    if entry is None:
        return ""
    ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
    if not isinstance(ref, dict):
        return _value(entry)
    secret = cluster.get("secrets", namespace, ref.get("name") or "")
    raw = ((secret or {}).get("data") or {}).get(ref.get("key") or "")
    try:
        return base64.b64decode(raw or "", validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return ""


def _interval(text: str) -> float | None:
    if not text.strip():
        return DEFAULT_INTERVAL
    try:
        seconds = float(text)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds > 0 else None


def _agent(cluster, pod: dict, container: dict, config: AgentConfig) -> PodAgent:
    meta, spec = pod["metadata"], pod.get("spec") or {}
    owner = next(
        (r for r in meta.get("ownerReferences") or [] if r.get("kind") == "StatefulSet"), None
    )
    node = cluster.get("nodes", "", spec.get("nodeName") or "")
    labels = (node or {}).get("metadata", {}).get("labels") or {}
    running = (pod.get("status") or {}).get("phase") == "Running"
    mig, gpus = _devices(container)
    return PodAgent(
        name=owner["name"] if owner else meta["name"],
        config=config,
        running=running and not meta.get("deletionTimestamp"),
        vm_size=labels.get("node.kubernetes.io/instance-type", ""),
        mig_profile=mig,
        gpus=gpus,
    )


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
