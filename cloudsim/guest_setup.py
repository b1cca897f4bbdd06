"""What an environment's layer does inside an emulated VM's guest, as the VM's agent reports it
(docs/agent-protocol.md: `setup` and `jupyter_ready`).

A VM made from an environment carries agent/environment_init.py's cloud-config: a oneshot unit
runs /opt/gpu-portal-env/setup.sh, whose `step <name>` lines name what it does (packages, conda
or python, pip, jupyterlab, dotfiles, personal, done), and JupyterLab starts once it finished.
The emulator plays that script from its own text:

- its steps follow each other over SetupPlay.seconds (None: 2 x the LRO latency) from the
  first time the VM's guest runs;
- the last step waits while a VM extension is still installing (on Azure, apt waits for the
  NVIDIA driver extension's dpkg lock), then succeeds, and JupyterLab answers;
- a "guest.setup" fault of kind "setup_failed", queued before the guest first runs, fails the
  middle step: the agent reports it failed with the log's last lines, as the real agent reads
  them from /var/log/gpu-portal-env.log.
"""

import base64
import json
import re
import time
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from .models import VM

if TYPE_CHECKING:
    from .cloud import Cloud

FAULT_OP = "guest.setup"
FAULT_KINDS = frozenset({"setup_failed"})
SCRIPT_PATH = "/opt/gpu-portal-env/setup.sh"  # agent/environment_init.SETUP_PATH
_STEP = re.compile(r"^step ([A-Za-z0-9_-]{1,32})$", re.MULTILINE)


@lru_cache(maxsize=512)
def layer_steps(custom_data: str | None) -> tuple[str, ...]:
    """The setup script's steps, in order, from a VM's customData (base64 "#cloud-config\\n"
    + JSON); () when it carries no environment layer or cannot be read."""
    if not custom_data:
        return ()
    try:
        text = base64.b64decode(custom_data).decode("utf-8")
        document = json.loads(text.partition("\n")[2])
        files = document.get("write_files") or []
        script = next(f["content"] for f in files if f.get("path") == SCRIPT_PATH)
    except (ValueError, TypeError, AttributeError, KeyError, StopIteration):
        return ()
    return tuple(_STEP.findall(script)) if isinstance(script, str) else ()


def reading(cloud: "Cloud", vm: VM, now: float | None = None) -> dict:
    """The `setup` and `jupyter_ready` fields of the VM's next heartbeat sample ({} without a
    layer). The caller holds cloud.lock and calls it only while the guest runs."""
    steps = layer_steps(vm.custom_data)
    if not steps:
        return {}
    now = time.time() if now is None else now
    if vm.setup_began is None:
        vm.setup_began = now
        vm.setup_fails = cloud.take_fault(FAULT_OP, FAULT_KINDS) is not None
    seconds = cloud.extension_play.setup_seconds
    total = 2 * cloud.latency if seconds is None else seconds
    at = int((now - vm.setup_began) / total * len(steps)) if total > 0 else len(steps)
    failing = len(steps) // 2 if vm.setup_fails else None
    if failing is not None and at >= failing:
        return _failed(steps[failing], vm.setup_began)
    if at < len(steps) - 1 or _extension_installing(vm):
        return {"setup": {"step": steps[min(at, len(steps) - 1)], "state": "running"}}
    return {"setup": {"step": steps[-1], "state": "succeeded"}, "jupyter_ready": True}


def _extension_installing(vm: VM) -> bool:
    return any(ext.exit_code is None for ext in vm.extensions.values())


def _failed(step: str, began: float) -> dict:
    stamp = datetime.fromtimestamp(began, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    tail = [
        f"== {step} {stamp}",
        f"ERROR: the {step} step of the environment failed (exit status 1)",
        "gpu-portal-env.service: Main process exited, code=exited, status=1/FAILURE",
    ]
    return {"setup": {"step": step, "state": "failed", "log_tail": tail}, "jupyter_ready": False}
