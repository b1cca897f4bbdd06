"""Seconds from SIGKILL of the leading Celery beat to the first task the standby sends.

Migrates a fresh SQLite database in a temporary folder (or uses --database-url, e.g. a
PostgreSQL database that is already migrated), then per run starts two real `celery beat`
processes with the idle sweep every second (so a sweep is overdue the moment the standby
leads), waits until one leads and the other stands by, waits a random part of a renewal
period (a kill lands anywhere in it), kills the leader with SIGKILL and times the standby's
first send, read from the embedded broker's folder (tests/beat_processes.py). Prints each
run and the median. The bound is BEAT_LEASE_SECONDS + BEAT_LEASE_POLL_SECONDS.

    python benchmarks/beat_takeover.py [--runs 3] [--lease 30] [--poll 10]
"""

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.beat_processes import beat_log, beat_sent, beat_start  # noqa: E402


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def one_run(folder: Path, database_url: str, lease: float, poll: float) -> float:
    """Seconds from the leader's SIGKILL to the standby's first send."""
    env = {
        "BEAT_LEASE_SECONDS": str(lease),
        "BEAT_LEASE_POLL_SECONDS": str(poll),
        "IDLE_SWEEP_SECONDS": "1",
    }
    procs = {n: beat_start(name=n, folder=folder, database_url=database_url, env=env) for n in "ab"}
    try:
        _wait_for(lambda: all("beat: Starting" in beat_log(folder, n) for n in procs), 120, "start")
        _wait_for(lambda: any(" leads from " in beat_log(folder, n) for n in procs), 120, "leader")
        leader = next(n for n in procs if " leads from " in beat_log(folder, n))
        standby = next(n for n in procs if n != leader)
        _wait_for(lambda: "standing by" in beat_log(folder, standby), 120, "the standby")
        time.sleep(2 + random.uniform(0, lease / 3))
        killed_ms = time.monotonic() * 1000
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait()
        survivor = procs[standby].pid

        def taken_over() -> bool:
            return any(s.pid == survivor and s.at_ms >= killed_ms for s in beat_sent(folder))

        _wait_for(taken_over, lease + poll + 60, "the standby's first send")
        first = min(s.at_ms for s in beat_sent(folder) if s.pid == survivor)
        return (first - killed_ms) / 1000
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--lease", type=float, default=30.0, help="BEAT_LEASE_SECONDS")
    parser.add_argument("--poll", type=float, help="BEAT_LEASE_POLL_SECONDS (default lease/3)")
    parser.add_argument("--database-url", help="a migrated database (default: a fresh SQLite)")
    args = parser.parse_args()
    poll = args.poll or args.lease / 3
    with tempfile.TemporaryDirectory() as tmp:
        database_url = args.database_url or f"sqlite:///{tmp}/portal.sqlite3"
        if not args.database_url:
            env = {**os.environ, "DATABASE_URL": database_url, "PORTAL_VAR_DIR": tmp}
            cmd = [sys.executable, "manage.py", "migrate", "-v0"]
            subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        times = []
        for n in range(args.runs):
            folder = Path(tmp) / f"run{n}"
            folder.mkdir()
            times.append(one_run(folder, database_url, args.lease, poll))
            print(f"run {n + 1}: takeover {times[-1]:.2f} s", flush=True)
    print(
        f"beat takeover after SIGKILL (lease {args.lease:g} s, poll {poll:g} s, bound "
        f"{args.lease + poll:g} s): median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s over {args.runs} runs"
    )


if __name__ == "__main__":
    main()
