"""Real `celery beat` processes for the fail-over test, and what they sent.

Each beat publishes to the embedded filesystem broker in a folder the test owns and no worker
reads, so every message a beat sent stays there: its file name starts with the monotonic
milliseconds of the send (portal/kombu_filesystem.py; one clock for every process on Linux),
and Celery's ``origin`` header names the sending process (``gen<pid>@host``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Sent:
    at_ms: int  # time.monotonic() * 1000 when the beat published it
    pid: int  # the beat process that sent it
    task: str


def beat_start(
    *, name: str, folder: Path, database_url: str, env: dict[str, str]
) -> subprocess.Popen:
    """One `celery -A portal beat` with its own schedule file, logging to ``folder/name.log``;
    the broker is ``folder/var/broker`` (shared by every beat started with this folder)."""
    environment = {
        **os.environ,
        "DATABASE_URL": database_url,
        "CELERY_BROKER_URL": "filesystem://",
        "PORTAL_VAR_DIR": str(folder / "var"),
        "CELERY_TASK_ALWAYS_EAGER": "0",  # else beat would run the tasks itself
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    cmd = [sys.executable, "-m", "celery", "-A", "portal", "beat", "-l", "INFO"]
    cmd += ["--schedule", str(folder / f"{name}-schedule")]
    log = open(folder / f"{name}.log", "wb")  # noqa: SIM115 (the process keeps it)
    return subprocess.Popen(cmd, cwd=ROOT, env=environment, stdout=log, stderr=subprocess.STDOUT)


def beat_sent(folder: Path) -> list[Sent]:
    """Every message the beats started with ``folder`` published, oldest first."""
    sent = []
    for path in (folder / "var" / "broker" / "out").glob("*.msg"):
        headers = json.loads(path.read_text())["headers"]
        pid = int(headers["origin"].split("@")[0].removeprefix("gen"))
        sent.append(Sent(at_ms=int(path.name.split("_")[0]), pid=pid, task=headers["task"]))
    return sorted(sent, key=lambda s: s.at_ms)


def beat_log(folder: Path, name: str) -> str:
    path = folder / f"{name}.log"
    return path.read_text(errors="replace") if path.exists() else ""
