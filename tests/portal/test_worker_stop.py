"""`make run`'s stop: honcho sends SIGTERM to each Procfile process's group and SIGKILLs what
is still running KILL_WAIT (5) seconds later. The worker must be gone by then, with exit
status 0 (a warm shutdown), not killed.

The worker runs as honcho runs it: the Procfile's ``worker:`` line through ``sh -c`` in a
session of its own, on the embedded default (SQLite and the filesystem broker under a fresh
PORTAL_VAR_DIR), and the SIGTERM goes to its whole process group, pool processes included.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from honcho.manager import KILL_WAIT

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.process,
    # The worker runs on the embedded default whatever the suite's database: once is enough.
    pytest.mark.skipif(bool(os.environ.get("DATABASE_URL")), reason="runs in the SQLite pass"),
]
# What would make this a production-stack worker, or not a worker at all.
NOT_EMBEDDED = ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "CELERY_TASK_ALWAYS_EAGER")


def _procfile_line(name: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"the Procfile has no {name}: line")


def _wait_for(path: Path, text: str, process: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if text in path.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} within {seconds} s:\n{path.read_text(errors='replace')}")


def test_the_procfile_worker_stops_on_sigterm_before_honcho_would_kill_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in NOT_EMBEDDED}
    env["PORTAL_VAR_DIR"] = str(tmp_path / "var")
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            ["sh", "-c", _procfile_line("worker")],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # as honcho starts each process
        )
    try:
        _wait_for(log, "ready.", worker, 120)
        time.sleep(0.5)  # the pool's processes wait for work, as in an idle `make run`
        started = time.monotonic()
        os.killpg(worker.pid, signal.SIGTERM)  # honcho's stop
        try:
            rc = worker.wait(KILL_WAIT + 10)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - started
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    print(f"worker exited {rc} {took:.2f} s after SIGTERM")
    assert rc == 0, log.read_text(errors="replace")[-3000:]
    assert took < KILL_WAIT, f"{took:.2f} s: honcho would have killed it"
    assert "Warm shutdown" in log.read_text(errors="replace")
