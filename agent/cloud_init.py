"""The VM's custom_data that installs the telemetry agent (docs/agent-protocol.md §1).

``render`` writes a cloud-config as JSON: the agent's config, the agent program itself
(gzip + base64) and a systemd unit that keeps it running; ``agent_config`` reads the config
back out of such a document; ``agent_source`` and ``nvml_requirement`` give a MIG pod the same
program and NVML pin. Standard library only.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
from pathlib import Path
from typing import Any

CONFIG_PATH = "/etc/gpu-portal-agent/config.json"
AGENT_PATH = "/opt/gpu-portal-agent/gpu_portal_agent.py"
# pip installs into the agent's own directory: Ubuntu 23.04+ and Debian 12 refuse a system-wide
# `pip install` (PEP 668), and --target is exempt from that check.
AGENT_LIB_DIR = "/opt/gpu-portal-agent/lib"
UNIT_NAME = "gpu-portal-agent"
UNIT_PATH = f"/etc/systemd/system/{UNIT_NAME}.service"
NVIDIA_ML_PY_VERSION = "13.615.71"  # the same pin as requirements.txt
MAX_CUSTOM_DATA_BYTES = 64 * 1024  # Azure's limit, before base64

_AGENT_SOURCE = Path(__file__).with_name("gpu_portal_agent.py")
_HEADER = "#cloud-config\n"
EXIT_GONE = 3  # gpu_portal_agent.EXIT_GONE: the portal answered 410, so no restart

UNIT = f"""\
[Unit]
Description=GPU portal telemetry agent
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/python3 {AGENT_PATH} --config {CONFIG_PATH}
Environment=PYTHONPATH={AGENT_LIB_DIR}
Environment=PYTHONUNBUFFERED=1
Restart=always
RestartSec=10
RestartPreventExitStatus={EXIT_GONE}
NoNewPrivileges=yes
ProtectSystem=full
ProtectHome=read-only
PrivateTmp=yes

[Install]
WantedBy=multi-user.target
"""


def render(*, portal_url: str, workspace: str, token: str, interval_seconds: float) -> str:
    """The custom_data text (before Azure's base64) for a VM of ``workspace``: the agent posts
    to ``portal_url`` with ``token`` every ``interval_seconds`` seconds."""
    document = agent_document(
        portal_url=portal_url, workspace=workspace, token=token, interval_seconds=interval_seconds
    )
    return dump(document)


def dump(document: dict[str, Any]) -> str:
    """A cloud-config document as custom_data text: the header line, then the document."""
    # json.dumps' default ", " and ": " separators keep the text valid YAML 1.1 as well.
    return _HEADER + json.dumps(document)


def agent_document(
    *,
    portal_url: str,
    workspace: str,
    token: str,
    interval_seconds: float,
    extra_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The cloud-config (a dict: write_files and runcmd) that installs and starts the agent;
    ``extra_config`` adds keys to its config.json (e.g. jupyter_url, jupyter_token). Raises
    ValueError for an interval that is not a positive number."""
    if (
        isinstance(interval_seconds, bool)
        or not isinstance(interval_seconds, (int, float))
        or interval_seconds <= 0
    ):
        raise ValueError("interval_seconds must be a positive number")
    config = {
        "portal_url": portal_url.rstrip("/"),
        "workspace": str(workspace),
        "token": token,
        "interval_seconds": interval_seconds,
        **(extra_config or {}),
    }
    return {
        "write_files": [
            {"path": CONFIG_PATH, "permissions": "0600", "content": json.dumps(config)},
            {
                "path": AGENT_PATH,
                "permissions": "0755",
                "encoding": "gz+b64",
                "content": _packed_agent(),
            },
            {"path": UNIT_PATH, "permissions": "0644", "content": UNIT},
        ],
        "runcmd": [
            ["python3", "-m", "pip", "install", "--target", AGENT_LIB_DIR, nvml_requirement()],
            ["systemctl", "daemon-reload"],
            ["systemctl", "enable", "--now", UNIT_NAME],
        ],
    }


def agent_source() -> str:
    """The agent's program (agent/gpu_portal_agent.py) as text, as a MIG pod's ConfigMap
    carries it. Raises OSError when the file cannot be read."""
    return _AGENT_SOURCE.read_text(encoding="utf-8")


def nvml_requirement() -> str:
    """The pip requirement the agent needs for NVML: "nvidia-ml-py==<the pinned version>"."""
    return f"nvidia-ml-py=={NVIDIA_ML_PY_VERSION}"


def _packed_agent() -> str:
    # mtime=0 keeps the output a function of the source alone, so equal inputs render equally.
    return base64.b64encode(gzip.compress(_AGENT_SOURCE.read_bytes(), mtime=0)).decode("ascii")


def agent_config(custom_data: str) -> dict[str, Any] | None:
    """The agent config inside a custom_data document as ``render`` writes it (plain, or
    base64 as on the wire), or None when it holds none."""
    text = _plain_text(custom_data)
    if text is None or not text.startswith("#cloud-config"):
        return None
    try:
        document = json.loads(text.split("\n", 1)[1] if "\n" in text else "")
        for entry in document.get("write_files", []):
            if entry.get("path") == CONFIG_PATH:
                config = json.loads(entry["content"])
                return config if isinstance(config, dict) else None
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
    return None


def _plain_text(custom_data: str) -> str | None:
    if custom_data.startswith("#"):
        return custom_data
    try:
        return base64.b64decode(custom_data, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
