"""The IDE activity of a heartbeat sample (docs/agent-protocol.md, "IDE activity"): when the
user last worked in JupyterLab, VS Code or a terminal, from the times an open browser tab does
not move, and the kernels busy on a cell. Parsed beside the rest of the sample by
workspaces.telemetry, folded by workspaces.idle as the workspace's last work.

Sources, for why each time is or is not counted: jupyter_server's REST API (GET /api/status,
/api/kernels, /api/terminals; services/api/handlers.py APIStatusHandler, base/handlers.py
APIHandler.update_api_activity, services/kernels/kernelmanager.py start_watching_activity),
jupyterhub/jupyterhub-idle-culler's README and issue #55, jupyterlab/jupyterlab#9379, and
code-server's src/node/heart.ts and src/node/routes/index.ts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

# As workspaces.telemetry takes a sample's own time: outside these, no clock's reading.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)

# docs/agent-protocol.md, "IDE activity": the times that only a person at work moves. Not
# counted: jupyter.last_activity (jupyter_server's /api/status, which every API request of an
# open JupyterLab tab moves) and vscode.last_activity (code-server's heartbeat, which beats
# every minute while a tab is connected).
IDE_WORK_TIMES = (
    ("jupyter", "kernels_active_at"),
    ("jupyter", "terminals_active_at"),
    ("jupyter", "saved_at"),
    ("vscode", "saved_at"),
    (None, "terminal_input_at"),
    ("ssh", "input_at"),  # agent 1.2: the last keystroke in an SSH login (ssh_counts_open)
)


def ide_activity(raw: dict[str, Any], at: datetime) -> datetime | None:
    """The newest of a sample's IDE_WORK_TIMES, no later than the sample's time ``at``; None
    when it has none. Like ``setup``, what this portal does not understand (a newer agent's
    shape, a time it cannot read) is left out rather than refused: agents before 1.1 send none
    of it, and the GPU, sessions and busy kernels still judge the sample."""
    times = []
    for group, key in IDE_WORK_TIMES:
        holder = raw.get(group) if group else raw
        if isinstance(holder, dict):
            times.append(_ide_time(holder.get(key)))
    known = [t for t in times if t is not None]
    return min(max(known), at) if known else None


def _ide_time(value: object) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        moment = datetime.fromisoformat(value)
        utc = moment.astimezone(UTC) if moment.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None
    return utc if utc is not None and EARLIEST <= utc < LATEST else None


def ide_busy_kernels(raw: dict[str, Any]) -> int:
    """``jupyter.busy_kernels`` when it is a count, else 0 (the top-level
    ``jupyter_busy_kernels`` says the same for agents before 1.1)."""
    jupyter = raw.get("jupyter")
    busy = jupyter.get("busy_kernels") if isinstance(jupyter, dict) else None
    ok = isinstance(busy, int) and not isinstance(busy, bool) and 0 <= busy <= 10_000
    return busy if ok and isinstance(busy, int) else 0


def ssh_counts_open(raw: dict[str, Any]) -> bool:
    """Whether an open SSH login counts as work by itself: only for agents before 1.2, which
    send ``ssh_sessions`` alone. A 1.2 agent sends ``ssh`` (an object) with the logins' last
    input (``ssh.input_at``, counted as IDE work above), so a login left open with nobody
    typing no longer keeps the workspace awake (docs/agent-protocol.md, "SSH sessions")."""
    return not isinstance(raw.get("ssh"), dict)
