"""The telemetry agent's side of docs/agent-protocol.md, as the emulator plays it.

Pure functions only: read the agent config a VM's customData carries (section 1), name a VM
size's GPUs, and make one heartbeat sample (section 2) for a GPU-utilisation profile.
"""

import base64
import json
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

CONFIG_PATH = "/etc/gpu-portal-agent/config.json"
AGENT_VERSION = "1.1"  # The fields of agent/gpu_portal_agent.py 1.1
PROFILES = ("busy", "batch", "idle", "spiky", "silent", "tab_open", "training")
# Profiles whose GPUs are busy; the others' are idle (spiky: but for its spikes).
GPU_BUSY_PROFILES = ("busy", "batch", "training")
DEFAULT_SPIKE_EVERY = 10  # Samples: a spiky VM shows one 100 % sample in this many.
MAX_GPUS = 64  # The protocol's limit on `gpus` entries.
NVML_MISSING = "unavailable: NVML Shared Library Not Found"


def check_profile(profile: str) -> str:
    """The profile itself, or ValueError naming the known ones."""
    if profile not in PROFILES:
        raise ValueError(f"Unknown agent profile '{profile}'. Known: {', '.join(PROFILES)}.")
    return profile


@dataclass(frozen=True)
class AgentConfig:
    """config.json: portal_url (no trailing slash), workspace (UUID), token, interval (seconds).

    The token is a secret: repr=False keeps it out of reprs, logs and tracebacks."""

    portal_url: str
    workspace: str
    token: str = field(repr=False)
    interval: float

    @property
    def heartbeat_url(self) -> str:
        return f"{self.portal_url}/api/workspaces/{self.workspace}/heartbeat/"


@lru_cache(maxsize=512)
def agent_config(custom_data: str | None) -> AgentConfig | None:
    """The agent config in a VM's customData (base64 "#cloud-config\\n" + JSON), or None.

    Cached: the player reads it every tick, and customData only changes on a PUT."""
    if not custom_data:
        return None
    try:
        text = base64.b64decode(custom_data).decode("utf-8")
        head, _, rest = text.partition("\n")
        if head.strip() != "#cloud-config":
            return None
        return _config_from(json.loads(rest))
    except (ValueError, TypeError, AttributeError):  # Not base64, not UTF-8, not JSON, odd shape.
        return None


def _config_from(document: dict) -> AgentConfig | None:
    entries = [
        entry
        for entry in document.get("write_files") or []
        if isinstance(entry, dict) and entry.get("path") == CONFIG_PATH
    ]
    if not entries or not isinstance(entries[0].get("content"), str):
        return None
    raw = json.loads(entries[0]["content"])
    url, workspace, token = (raw.get(k) for k in ("portal_url", "workspace", "token"))
    interval = raw.get("interval_seconds")
    if not all(isinstance(v, str) and v.strip() for v in (url, workspace, token)):
        return None
    if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
        return None
    return AgentConfig(url.rstrip("/"), workspace, token, float(interval))


@dataclass(frozen=True)
class GpuModel:
    """What NVML would report: name (None: not an NVIDIA GPU, so no NVML) and memory in MiB."""

    name: str | None
    memory_mib: int


# (pattern on the size name without "_Promo", GPU as nvidia-smi names it, MiB). First match wins.
GPU_TABLE: tuple[tuple[str, str | None, int], ...] = (
    (r"Standard_NC\d+ads_A100_v4", "NVIDIA A100 80GB PCIe", 81920),
    (r"Standard_ND96amsr_A100_v4", "NVIDIA A100-SXM4-80GB", 81920),
    (r"Standard_ND96asr_v4", "NVIDIA A100-SXM4-40GB", 40960),
    (r"Standard_NC\d+adi?s_H100_v5", "NVIDIA H100 NVL", 95830),
    (r"Standard_ND96isr_H100_v5", "NVIDIA H100 80GB HBM3", 81559),
    (r"Standard_NC\d+as_T4_v3", "Tesla T4", 15360),
    # Fractional A10s: the VM's vGPU profile and its frame buffer (4, 8, 12 GiB).
    (r"Standard_NV6ads_A10_v5", "NVIDIA A10-4Q", 4096),
    (r"Standard_NV12ads_A10_v5", "NVIDIA A10-8Q", 8192),
    (r"Standard_NV18ads_A10_v5", "NVIDIA A10-12Q", 12288),
    (r"Standard_NV\d+adm?s_A10_v5", "NVIDIA A10", 24564),
    (r"Standard_NC\d+r?s_v3", "Tesla V100-PCIE-16GB", 16384),
    (r"Standard_ND40rs_v2", "Tesla V100-SXM2-32GB", 32768),
    (r"Standard_NC(6|12|24|24r)", "Tesla K80", 11441),
    (r"Standard_NV(6|12|24|\d+s_v3)", "Tesla M60", 8129),
    (r"Standard_NV\d+as_v4", None, 16384),  # AMD Radeon Instinct MI25: NVML finds nothing.
)
FALLBACK_GPU = GpuModel("NVIDIA GPU", 16384)


def gpu_model(size: str) -> GpuModel:
    """The GPU a size carries: "Standard_NC24ads_A100_v4" -> NVIDIA A100 80GB PCIe, 81920 MiB."""
    base = re.sub(r"_Promo$", "", size, flags=re.IGNORECASE)
    for pattern, name, memory in GPU_TABLE:
        if re.fullmatch(pattern, base, flags=re.IGNORECASE):
            return GpuModel(name, memory)
    return FALLBACK_GPU


def make_sample(
    profile: str,
    rng: random.Random,
    gpu: GpuModel,
    count: int,
    seq: int,
    spike_every: int,
    mig_profile: str | None = None,
    *,
    now: datetime | None = None,
    started: datetime | None = None,
) -> dict:
    """One sample for a profile other than "silent", read at `now` (default: the clock); seq
    numbers the VM's samples from 1, and `started` is when the agent began playing this
    profile (default: `now`).

    busy: 80-98 % on every GPU, 1 ssh session, cpu 40-70 %; batch: as busy, but nobody logged
    in (a job left running); idle: 0 %, ~0.5 GiB used, cpu 0-3 %; spiky: idle, but every
    spike_every-th sample has every GPU at 100 %.
    tab_open: idle, with a JupyterLab tab left open (its polling keeps Jupyter's
    /api/status last_activity and code-server's heartbeat at `now`) and the last cell run and
    file saved at `started`; training: busy GPUs and a Jupyter kernel busy since `started` on
    one long cell (a fit that prints nothing), nobody logged in (docs/agent-protocol.md, "IDE
    activity").
    mig_profile ("1g.10gb"): the agent of a MIG pod, which sees one MIG device of `gpu` and
    no utilisation (NVML has no counter per MIG device), and whose user works in Jupyter (a
    busy kernel, not an ssh session)."""
    at = now or datetime.now(UTC)
    spike = profile == "spiky" and seq % spike_every == 0
    level = "busy" if profile in GPU_BUSY_PROFILES else ("spike" if spike else "idle")
    busy = profile == "busy"  # Someone at work; a batch job runs with nobody logged in.
    if mig_profile is not None:
        gpus = [_mig_entry(gpu, mig_profile, level, rng)]
    else:
        gpus = [_gpu_entry(i, gpu, level, rng) for i in range(min(max(count, 1), MAX_GPUS))]
    kernels = 1 if profile == "training" or (busy and mig_profile is not None) else 0
    sample: dict[str, Any] = {
        # Microseconds: with the sub-second intervals of tests and demos, whole seconds would
        # repeat, and the portal drops a sample not newer than the last one it took.
        "at": _iso(at),
        "nvml": "ok" if gpu.name else NVML_MISSING,
        # As the real agent: "loaded" when the NVIDIA kernel driver answers, else "missing".
        "driver": "loaded" if gpu.name else "missing",
        "gpus": gpus if gpu.name else [],
        "ssh_sessions": 1 if busy and mig_profile is None else 0,
        "jupyter_busy_kernels": kernels,
        "cpu_percent": round(rng.uniform(40, 70) if busy else rng.uniform(0, 3), 1),
    }
    sample.update(_ide(profile, at, started or at, kernels))
    return sample


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _ide(profile: str, at: datetime, started: datetime, kernels: int) -> dict[str, Any]:
    """The IDE activity fields of the real agent 1.1 for the profiles that have them."""
    if profile == "tab_open":
        return {
            # What an open tab moves: every API request it polls with, and its connection.
            "jupyter": {"last_activity": _iso(at), "connections": 1, "busy_kernels": 0,
                        "kernels_active_at": _iso(started), "saved_at": _iso(started)},
            "vscode": {"last_activity": _iso(at)},
        }  # fmt: skip
    if profile == "training":
        return {
            "jupyter": {"last_activity": _iso(at), "connections": 1, "busy_kernels": kernels,
                        "kernels_active_at": _iso(started)},
        }  # fmt: skip
    return {}


def _gpu_entry(index: int, gpu: GpuModel, level: str, rng: random.Random) -> dict:
    """One `gpus` entry; level is "busy", "idle" or "spike" (a brief 100 % burst)."""
    if level == "busy":
        util, used, processes = rng.randint(80, 98), int(gpu.memory_mib * rng.uniform(0.6, 0.9)), 1
    elif level == "spike":
        util, used, processes = 100, rng.randint(2048, 4096), 1
    else:
        util, used, processes = 0, rng.randint(480, 560), 0  # Driver and context: ~0.5 GiB.
    return {
        "index": index,
        "name": gpu.name,
        "util_percent": util,
        "mem_used_mib": min(used, gpu.memory_mib),
        "mem_total_mib": gpu.memory_mib,
        "processes": processes,
        "mig_profile": None,
    }


def mig_memory_mib(profile: str) -> int:
    """What NVML reports as a MIG device's memory: a little under its name's GB ("1g.10gb":
    9728 MiB; "1g.5gb": 4864 MiB, as nvidia-smi shows them on A100s)."""
    match = re.fullmatch(r"\d+g\.(\d+)gb", profile)
    return int(match.group(1)) * 1024 * 95 // 100 if match else 0


def _mig_entry(gpu: GpuModel, profile: str, level: str, rng: random.Random) -> dict:
    """The one `gpus` entry of a pod holding a MIG device of `gpu`."""
    device = GpuModel(f"{gpu.name} MIG {profile}", mig_memory_mib(profile))
    entry = _gpu_entry(0, device, level, rng)
    return {**entry, "util_percent": None, "mig_profile": profile}
